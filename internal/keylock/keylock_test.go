package keylock

import (
	"sync"
	"testing"
)

func TestLocks(t *testing.T) {
	var l Locks
	var wg sync.WaitGroup
	counts := map[string]int{}
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			unlock := l.Lock(key)
			counts[key]++ // a data race unless the key's lock serialises it
			unlock()
		}([]string{"a", "b"}[i%2])
	}
	wg.Wait()
	if counts["a"] != 100 || counts["b"] != 100 {
		t.Fatalf("counts %v", counts)
	}
	if len(l.m) != 0 {
		t.Fatalf("%d entries left after every unlock", len(l.m))
	}
}
