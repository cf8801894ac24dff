package kubetest

import "testing"

// Shared is one control plane for all of a package's tests, started by its
// TestMain: starting it is most of their time.
//
//	var plane kubetest.Shared
//	func TestMain(m *testing.M) { os.Exit(plane.Main(m)) }
//	func TestX(t *testing.T) { e := plane.Get(t); … }
type Shared struct {
	env *Env
	err error
}

// Main launches the control plane, runs the tests and stops it; it returns
// the exit code, failing a passing run whose control plane would not stop.
// A launch error fails (or skips) each test that asks for the control plane,
// not the others.
func (s *Shared) Main(m *testing.M) int {
	s.env, s.err = Launch()
	code := m.Run()
	if s.env != nil {
		if err := s.env.Stop(); err != nil && code == 0 {
			code = 1
		}
	}
	return code
}

// Get returns the running control plane, or ends the test as Require does.
func (s *Shared) Get(t testing.TB) *Env {
	t.Helper()
	Require(t, s.env, s.err)
	return s.env
}
