package gateway

import "sync"

// A registry maps string keys to the *V in flight (origins by route
// token, carriers by carrierHeader). Its methods are safe for concurrent
// use.
type registry[V any] struct {
	m sync.Map // string → *V
}

func (r *registry[V]) put(key string, v *V) { r.m.Store(key, v) }
func (r *registry[V]) delete(key string)    { r.m.Delete(key) }

// get returns the value put under key, or nil when there is none or key
// is "".
func (r *registry[V]) get(key string) *V {
	if key == "" {
		return nil
	}
	v, ok := r.m.Load(key)
	if !ok {
		return nil
	}
	return v.(*V)
}
