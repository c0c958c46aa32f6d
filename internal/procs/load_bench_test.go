package procs

import "testing"

// BenchmarkBeginEnd is what Load costs one POST (Begin and End), alone and
// with every P counting at once (one shared Load, as serve has).
func BenchmarkBeginEnd(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		l := &Load{}
		for b.Loop() {
			l.Begin()
			l.End()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := &Load{}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Begin()
				l.End()
			}
		})
	})
}
