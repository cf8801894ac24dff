package config

import (
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestValidateCluster(t *testing.T) {
	base := func() Config {
		c := Config{Cluster: ClusterConfig{Cluster: ClusterKubernetes, NodeName: "n1", Namespace: "warren", LeaseDuration: 15 * time.Second}}
		return c
	}
	single := Config{Cluster: ClusterConfig{NodeName: "NOT VALID"}}
	if err := single.validateCluster(); err != nil {
		t.Fatalf("a single host checks nothing of node mode: %v", err)
	}
	c := base()
	c.Cluster.AdvertiseURL = "http://10.0.0.1:3000/"
	if err := c.validateCluster(); err != nil || c.Cluster.AdvertiseURL != "http://10.0.0.1:3000" {
		t.Fatalf("valid: %v %q", err, c.Cluster.AdvertiseURL)
	}
	c = base()
	c.Cluster.NodeName = ""
	if err := c.validateCluster(); err != nil || c.Cluster.NodeName == "" {
		t.Fatalf("node name defaults to the host name: %v %q", err, c.Cluster.NodeName)
	}
	for flag, mutate := range map[string]func(*ClusterConfig){
		"--cluster":        func(k *ClusterConfig) { k.Cluster = "nomad" },
		"--node-name":      func(k *ClusterConfig) { k.NodeName = "Node_1" },
		"--kube-namespace": func(k *ClusterConfig) { k.Namespace = "a.b" },
		"--lease-duration": func(k *ClusterConfig) { k.LeaseDuration = time.Second },
		"--advertise-url":  func(k *ClusterConfig) { k.AdvertiseURL = "10.0.0.1:3000" },
	} {
		c := base()
		mutate(&c.Cluster)
		if err := c.validateCluster(); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: want ErrInvalid naming the flag, got %v", flag, err)
		}
	}
}

func TestAdvertise(t *testing.T) {
	if got := (ClusterConfig{}).Advertise("127.0.0.1:3000"); got != "http://127.0.0.1:3000" {
		t.Fatal(got)
	}
	if got := (ClusterConfig{AdvertiseURL: "https://n1.example"}).Advertise("127.0.0.1:3000"); got != "https://n1.example" {
		t.Fatal(got)
	}
	if got := (ClusterConfig{}).Advertise("0.0.0.0:3000"); strings.Contains(got, "0.0.0.0") {
		t.Fatal(got)
	}
}

func TestIsDNSLabel(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "node-1": true, "n.example": true, "0": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, "a-": false, "a.": false, "A": false, "a_b": false, strings.Repeat("a", 64): false,
	} {
		if got := isDNSLabel(s); got != want {
			t.Errorf("isDNSLabel(%q) = %v, want %v", s, got, want)
		}
	}
}
