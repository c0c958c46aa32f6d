package approval

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDisplaySecretKeys shows the display copy of one object of n
// members whose keys all look like GitHub tokens (each hidden as a
// numbered marker): the cost per member must not grow with n.
func BenchmarkDisplaySecretKeys(b *testing.B) {
	for _, n := range []int{100, 1000, 20000} {
		var sb strings.Builder
		sb.WriteString(`{"env":{`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `"ghp_%036d":0`, i)
		}
		sb.WriteString(`}}`)
		raw := []byte(sb.String())
		rd := DefaultRedaction()
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, _, err := Display(raw, rd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDisplayOrdinaryKeys shows the display copy of one object of n
// members whose keys no pattern matches (the audited call's usual case):
// each key is looked at for the patterns' prefixes.
func BenchmarkDisplayOrdinaryKeys(b *testing.B) {
	for _, n := range []int{50, 20000} {
		var sb strings.Builder
		sb.WriteString(`{"params":{`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `"request_field_name_%d":%d`, i, i)
		}
		sb.WriteString(`}}`)
		raw := []byte(sb.String())
		rd := DefaultRedaction()
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, _, err := Display(raw, rd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
