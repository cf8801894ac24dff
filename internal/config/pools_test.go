package config

import "testing"

func TestParsePools(t *testing.T) {
	c := Config{Pools: []string{"base=2", "py=1:4"}}
	got, err := c.ParsePools()
	if err != nil || len(got) != 2 || got[0] != (Pool{Template: "base", Min: 2, Max: 2}) || got[1] != (Pool{Template: "py", Min: 1, Max: 4}) {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"base", "base=-1", "base=2:1", "BAD=1", "base=x", "base=1:99999"} {
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
