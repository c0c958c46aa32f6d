package policy

import "testing"

// TestCommandCmd50FedExec (cmd50): docker exec -i and kin pass the
// command string's input to a program in a container, which reads it as
// commands. On 3eefbceb an allow rule naming printf and docker allowed
// printf 'rm -rf ~\n' | docker exec -i c sh and a deny rule for "rm *"
// missed it.
func TestCommandCmd50FedExec(t *testing.T) {
	bypass := []string{
		`printf 'rm -rf ~\n' | docker exec -i c sh`,
		`printf 'rm -rf ~\n' | docker exec -it c sh`,
		`printf 'rm x\n' | docker exec --interactive c bash`,
		`docker exec -i c sh < script.sh`,
		`docker exec -i c sh <<'EOF'
rm x
EOF`,
		`echo 'rm x' | podman exec -i c sh`,
		`echo 'rm x' | docker run -i --rm alpine sh`,
		`echo 'rm x' | docker run --rm -i alpine sh`,
		`echo 'rm x' | docker container exec -i c sh`,
		`echo 'rm x' | docker compose exec web sh`,
		`echo 'rm x' | docker attach c`,
		`echo 'rm x' | kubectl exec -i pod -- sh`,
		`echo 'rm x' | kubectl exec --stdin pod -- sh`,
		`echo 'rm x' | sudo docker exec -i c sh`,
		`echo 'rm x' | lxc exec c -- sh`,
	}
	fine := []string{
		`docker exec c ls`,
		`docker exec -it c ls`,
		`echo x | docker exec c ls`,
		`docker ps`,
		`echo x | docker attach --no-stdin c`,
		`echo x | kubectl get pods`,
		`kubectl exec pod -- ls`,
	}
	checkCommands(t, []string{"printf *", "echo *", "docker *", "podman *", "kubectl *", "sudo *", "lxc *"},
		bypass, fine, bypass, fine)
}

// TestCommandCmd50FedExecGlobalOptions (cmd50): a global option's value
// before the subcommand (kubectl -n ns, docker --context x) does not hide
// it.
func TestCommandCmd50FedExecGlobalOptions(t *testing.T) {
	bypass := []string{
		`echo 'rm x' | kubectl -n prod exec -i pod -- sh`,
		`echo 'rm x' | docker --context remote exec -i c sh`,
		`echo 'rm x' | docker -H tcp://h:2375 run -i alpine sh`,
	}
	fine := []string{`kubectl -n prod get pods`, `echo x | kubectl -n prod exec pod -- ls`}
	checkCommands(t, []string{"echo *", "docker *", "kubectl *"}, bypass, fine, bypass, fine)
}
