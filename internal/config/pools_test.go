package config

import (
	"testing"
	"time"
)

func TestParsePools(t *testing.T) {
	c := Config{Pools: []string{"base=2", "py=1:4"}}
	got, err := c.ParsePools()
	if err != nil || len(got) != 2 || got[0] != (Pool{Template: "base", Min: 2, Max: 2}) || got[1] != (Pool{Template: "py", Min: 1, Max: 4}) {
		t.Fatalf("%+v %v", got, err)
	}
	c = Config{Pools: []string{"a=1:3:10m", "b=2::1h", "c=1:1:0"}}
	got, err = c.ParsePools()
	if err != nil || len(got) != 3 || got[0] != (Pool{Template: "a", Min: 1, Max: 3, TTL: 10 * time.Minute}) ||
		got[1] != (Pool{Template: "b", Min: 2, Max: 2, TTL: time.Hour}) || got[2] != (Pool{Template: "c", Min: 1, Max: 1}) {
		t.Fatalf("with TTLs: %+v %v", got, err)
	}
	for _, bad := range []string{"base", "base=-1", "base=2:1", "BAD=1", "base=x", "base=1:99999", "base=1:2:3", "base=1:2:1s", "base=1:2:10m:x", "base=1:2:-5m"} {
		c := Config{Pools: []string{bad}}
		if _, err := c.ParsePools(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c = Config{Pools: []string{"a=1", "a@gvisor=2", "a@native=1"}}
	got, err = c.ParsePools()
	if err != nil || len(got) != 3 || got[1] != (Pool{Template: "a", Runtime: "gvisor", Min: 2, Max: 2}) || got[2].Runtime != "native" {
		t.Fatalf("a pool per runtime of one template: %+v %v", got, err)
	}
	for _, bad := range []string{"a@=1", "a@kata=1", "a@gvisor@native=1"} {
		c := Config{Pools: []string{bad}}
		if _, err := c.ParsePools(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c = Config{Pools: []string{"a=1", "a=2"}}
	if _, err := c.ParsePools(); err == nil {
		t.Error("duplicate template accepted")
	}
	c = Config{Pools: []string{"a=1"}, Network: NetworkConfig{Pools: []string{"a=2"}}}
	got, err = c.ParsePools()
	if err != nil || len(got) != 2 || got[1] != (Pool{Template: "a", Min: 2, Max: 2, Network: true}) {
		t.Fatalf("a pool of each kind for one template: %+v %v", got, err)
	}
}
