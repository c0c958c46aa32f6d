package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// netReading is the machine's loopback drops (softnetDrops) and TCP
// retransmissions (tcpRetransSegs) at one moment, for BenchmarkHeldCalls'
// idle-* and approve-* network metrics: a dropped data segment on
// loopback is sent again after at least 200 ms (the minimum RTO), a stall
// of its connection (docs/performance.md, "Postgres under 10,000 held
// calls: the agents' probes in step"). Both counters are the machine's,
// other processes' traffic included; -1 where unreadable.
type netReading struct {
	drops, retrans int64
	at             time.Time
}

func readNet() netReading {
	return netReading{drops: softnetDrops(), retrans: tcpRetransSegs(), at: time.Now()}
}

// report reports the drops and retransmissions from r to s as
// <phase>-drops and <phase>-retrans, and logs the window's wall-clock
// bounds, so that a sampler outside the benchmark can be lined up with it.
func (r netReading) report(b *testing.B, phase string, s netReading) {
	b.Helper()
	if r.drops >= 0 && s.drops >= 0 {
		b.ReportMetric(float64(s.drops-r.drops), phase+"-drops")
	}
	if r.retrans >= 0 && s.retrans >= 0 {
		b.ReportMetric(float64(s.retrans-r.retrans), phase+"-retrans")
	}
	b.Logf("%s window %s – %s UTC (unix %.3f – %.3f)", phase,
		r.at.UTC().Format("15:04:05.000"), s.at.UTC().Format("15:04:05.000"),
		float64(r.at.UnixMilli())/1000, float64(s.at.UnixMilli())/1000)
}

// tcpRetransSegs reads Tcp: RetransSegs of /proc/net/snmp (segments sent
// again, the machine's); -1 where it cannot be read.
func tcpRetransSegs() int64 {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return -1
	}
	return snmpField(string(b), "Tcp:", "RetransSegs")
}

// snmpField finds field in /proc/net/snmp's (or netstat's) pair of lines
// that start with prefix (a header line of names, then one of values);
// -1 if absent.
func snmpField(text, prefix, field string) int64 {
	var names []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != prefix {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == field && i < len(f) {
				v, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					return -1
				}
				return v
			}
		}
		return -1
	}
	return -1
}

// TestSNMPField reads a field from /proc/net/snmp's pairs of lines (the
// prefix's first line names the fields, its second holds the values).
func TestSNMPField(t *testing.T) {
	const text = "Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
		"Tcp: RtoAlgorithm ActiveOpens RetransSegs InErrs\nTcp: 1 42 1234 0\n" +
		"Udp: InDatagrams\nUdp: 7\n"
	for _, c := range []struct {
		prefix, field string
		want          int64
	}{
		{"Tcp:", "RetransSegs", 1234},
		{"Tcp:", "ActiveOpens", 42},
		{"Udp:", "InDatagrams", 7},
		{"Tcp:", "NoSuchField", -1},
		{"Icmp:", "InMsgs", -1},
	} {
		if got := snmpField(text, c.prefix, c.field); got != c.want {
			t.Errorf("snmpField(%s %s) = %d, want %d", c.prefix, c.field, got, c.want)
		}
	}
}
