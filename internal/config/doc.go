// Package config loads toolgate's YAML configuration (keys in DESIGN
// "Config keys").
//
// Loading follows STYLE R16: [Default] gives every default, [Load] decodes
// one YAML document over it strictly (an unknown key anywhere is an error
// naming the key and its line), expands ${VAR} and ${VAR:-default} in
// scalar values (never in keys; $$ is a literal $; an unset variable
// without a default is an error naming it and its line), and then
// [Config.Validate] reports every problem at once. [Config.Warnings] lists
// valid but suspicious settings, such as approvers lists that no
// configured approver satisfies. [Check] does all of this for `toolgate
// policy check FILE`, one line per problem; cmd then runs the checks of
// serve that need the environment (token sources, secrets kept from
// upstreams: [Config.Secrets], [Config.UpstreamEnvs]) with the same
// function serve uses.
//
// Secrets never appear in the file: agent and approver tokens are named by
// token_env, token_file or token_sha256 and resolved at serve time by
// [Config.Tokens]; other secrets (a Postgres DSN, upstream headers) come in
// through ${VAR}. Only cmd and this package read the environment, and this
// package only through the [Env] it is given.
package config
