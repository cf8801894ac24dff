package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// A template built with --runtime gvisor runs every sandbox made from it
// in gVisor — E2B creates, CLI creates, forks and its warm pool — and a
// create asking for another runtime is a 400 naming the one required.
func TestGVisorTemplateRuntime(t *testing.T) {
	t.Parallel()
	// The pool is configured before its template exists: it fills once
	// the template is built.
	d := gvisorDaemon(t, "--pool", "strong=1")
	ctx := ctxT(t, 3*time.Minute)
	c := d.client()

	if out, errOut, code := d.cli("", "template", "build", "weak", "--busybox", "--runtime", "kvm", "--data-dir", d.dataDir); code == 0 || !strings.Contains(errOut, "kvm") {
		t.Fatalf("build with an unknown runtime: exit %d, %q %q; want a failure naming it", code, out, errOut)
	}
	d.mustCLI("template", "build", "strong", "--busybox", "--runtime", "gvisor", "--data-dir", d.dataDir)

	ts, err := c.Templates.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runtimes := map[string]string{}
	for _, tm := range ts {
		runtimes[tm.TemplateID] = tm.Runtime
	}
	if runtimes["strong"] != "gvisor" || runtimes["bb"] != "" {
		t.Errorf("GET /templates runtimes = %v; want strong: gvisor, bb: none", runtimes)
	}
	if _, ok := runtimes["weak"]; ok {
		t.Error("a build refused for its runtime left a template")
	}
	if out := d.mustCLI("template", "ls"); !strings.Contains(out, "gvisor") {
		t.Errorf("warren template ls does not show the runtime:\n%s", out)
	}

	// The warm pool fills with gvisor sandboxes; the first create claims one.
	deadline := time.Now().Add(time.Minute)
	for {
		ps, err := c.Pools.List(ctx)
		if err != nil || len(ps) != 1 {
			t.Fatalf("pools: %+v, %v", ps, err)
		}
		if ps[0].Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool of strong never filled: %+v", ps[0])
		}
		time.Sleep(200 * time.Millisecond)
	}

	inGVisor := func(id, how string) {
		t.Helper()
		det, err := c.Sandboxes.Get(ctx, id)
		if err != nil || det.Runtime != "gvisor" {
			t.Fatalf("%s: %+v, %v; want runtime gvisor", how, det, err)
		}
		res, err := c.Commands.ExecWait(ctx, id, sh("uname -r"))
		if err != nil || !strings.Contains(res.Stdout, "gvisor") {
			t.Fatalf("%s: uname -r = %+v, %v; want gVisor's kernel", how, res, err)
		}
	}

	code, body := d.postAPI(ctx, "/sandboxes", `{"templateID":"strong","timeout":120}`)
	if code != http.StatusCreated {
		t.Fatalf("E2B create of strong: %d %s", code, body)
	}
	var sb client.Sandbox
	if err := json.Unmarshal([]byte(body), &sb); err != nil || sb.SandboxID == "" {
		t.Fatal(err)
	}
	inGVisor(sb.SandboxID, "E2B create naming no runtime")
	if ps, _ := c.Pools.List(ctx); len(ps) != 1 || ps[0].Hits != 1 {
		t.Errorf("the create missed the pool of strong: %+v", ps)
	}

	code, body = d.postAPI(ctx, "/sandboxes", `{"templateID":"strong","runtime":"native"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "requires the gvisor runtime") {
		t.Errorf("E2B create of strong on native: %d %s; want 400 naming the required runtime", code, body)
	}
	if _, errOut, code := d.cli("", "sandbox", "create", "--template", "strong", "--runtime", "native"); code == 0 || !strings.Contains(errOut, "requires the gvisor runtime") {
		t.Errorf("CLI create of strong on native: exit %d %q", code, errOut)
	}

	cli := strings.TrimSpace(d.mustCLI("sandbox", "create", "--template", "strong"))
	inGVisor(cli, "CLI create naming no runtime")
	forks, err := c.Snapshots.Fork(ctx, cli, client.ForkRequest{Count: 1})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %+v, %v", forks, err)
	}
	inGVisor(forks[0].Sandbox.SandboxID, "fork")

	// A template without a requirement keeps the server's default.
	plain, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if det, err := c.Sandboxes.Get(ctx, plain.SandboxID); err != nil || det.Runtime != "native" {
		t.Errorf("create of bb: %+v, %v; want the default runtime native", det, err)
	}
}
