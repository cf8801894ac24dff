package template

import (
	"fmt"
	"regexp"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// imageEnvFile keeps an image's configured environment (its Dockerfile's
// ENV: PATH with the image's tools, LANG, versions) for login shells, the
// way every command of the E2B SDK runs (bash -l, or sh -l).
const imageEnvFile = "etc/profile.d/00-warren-image-env.sh"

// profileReadingDropIns is /etc/profile for an image that has none
// (busybox, scratch-built): it reads /etc/profile.d as distributions do.
const profileReadingDropIns = "for f in /etc/profile.d/*.sh; do [ -r \"$f\" ] && . \"$f\"; done\n"

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// writeImageEnv writes the image config's Env as exports to imageEnvFile;
// an image without Env gets nothing.
func writeImageEnv(t *tree, img v1.Image) error {
	cfg, err := img.ConfigFile()
	if err != nil || cfg == nil || len(cfg.Config.Env) == 0 {
		return nil // no config is no environment, not a broken image
	}
	var b strings.Builder
	b.WriteString("# The environment of the image this template was made from.\n")
	for _, kv := range cfg.Config.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !envNameRE.MatchString(k) {
			continue
		}
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	if err := t.ensureDir("etc/profile.d", 0o755, 0, 0); err != nil {
		return err
	}
	if err := t.writeFile(imageEnvFile, []byte(b.String()), 0o644, 0, 0); err != nil {
		return err
	}
	if !t.exists("etc/profile") {
		return t.writeFile("etc/profile", []byte(profileReadingDropIns), 0o644, 0, 0)
	}
	return nil
}
