package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/client"
)

// volumeIOMiB is the file each round writes; readPasses is how many times
// a round reads it, so that a read takes long enough (tens of ms) for the
// exec around it not to count.
const (
	volumeIOMiB = 64
	readPasses  = 16
)

// VolumeIOReport compares a shared volume's throughput with the sandbox's
// own root (the naive baseline: the tree a sandbox writes to anyway), both
// seen from inside one sandbox, in rounds that alternate the two.
type VolumeIOReport struct {
	// Write*: dd of volumeIOMiB MiB with conv=fsync (the data on disk);
	// Read*: readPasses cats of that file to /dev/null (from the page
	// cache, which is what a tool reading a file it just wrote gets).
	WriteVolume Stats `json:"write_volume"`
	WriteRoot   Stats `json:"baseline_write_root"`
	ReadVolume  Stats `json:"read_volume"`
	ReadRoot    Stats `json:"baseline_read_root"`
	// MB/s at the p50s, and volume / root (target ≥ TargetRatio).
	WriteVolumeMBps float64 `json:"write_volume_mb_per_s_p50"`
	WriteRootMBps   float64 `json:"write_root_mb_per_s_p50"`
	ReadVolumeMBps  float64 `json:"read_volume_mb_per_s_p50"`
	ReadRootMBps    float64 `json:"read_root_mb_per_s_p50"`
	WriteRatio      float64 `json:"write_ratio_volume_vs_root_p50"`
	ReadRatio       float64 `json:"read_ratio_volume_vs_root_p50"`
	TargetRatio     float64 `json:"target_ratio"`
}

// measureVolumeIO makes a volume and a sandbox of tmpl that mounts it, and
// times rounds writes and reads of a file on each side; both go at the end.
func measureVolumeIO(ctx context.Context, c *client.Client, tmpl string, rounds int) (rep VolumeIOReport, retErr error) {
	vol, err := c.Volumes.Create(ctx, "bench-volume-io", volumeIOMiB*4)
	if err != nil {
		return rep, err
	}
	defer func() {
		if err := c.Volumes.Delete(context.WithoutCancel(ctx), vol.VolumeID); err != nil && retErr == nil {
			retErr = err
		}
	}()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: tmpl, VolumeMounts: []client.VolumeMount{{Name: vol.Name, Path: "/vol"}}})
	if err != nil {
		return rep, err
	}
	defer func() {
		// Before the volume's delete above, which a live sandbox refuses.
		if err := c.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID); err != nil && retErr == nil {
			retErr = err
		}
	}()
	run := func(cmd string) (time.Duration, error) {
		start := time.Now()
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: cmd, User: "root", TimeoutMs: 120_000})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("%s: exit %d: %s", cmd, res.ExitCode, res.Stderr)
		}
		return time.Since(start), err
	}
	var wv, wr, rv, rr []time.Duration
	for i := 0; i <= rounds; i++ { // round 0 warms up
		type side struct {
			file string
			w, r *[]time.Duration
		}
		sides := []side{{"/vol/io.bin", &wv, &rv}, {"/io.bin", &wr, &rr}}
		if i%2 == 1 {
			// Either side goes first in every other round: neither gets
			// the background work the other's delete left.
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			w, err := run(fmt.Sprintf("dd if=/dev/zero of=%s bs=1M count=%d conv=fsync 2>/dev/null", side.file, volumeIOMiB))
			if err != nil {
				return rep, err
			}
			r, err := run(fmt.Sprintf("for i in $(seq %d); do cat %s; done > /dev/null", readPasses, side.file))
			if err != nil {
				return rep, err
			}
			if _, err := run("rm -f " + side.file); err != nil {
				return rep, err
			}
			if i > 0 {
				*side.w, *side.r = append(*side.w, w), append(*side.r, r)
			}
		}
	}
	rep = VolumeIOReport{WriteVolume: Summarise(wv), WriteRoot: Summarise(wr), ReadVolume: Summarise(rv), ReadRoot: Summarise(rr), TargetRatio: 0.9}
	mbps := func(s Stats, passes int) float64 {
		if s.P50 <= 0 {
			return 0
		}
		return round2(float64(volumeIOMiB*passes) * 1.048576 / (s.P50 / 1000))
	}
	rep.WriteVolumeMBps, rep.WriteRootMBps = mbps(rep.WriteVolume, 1), mbps(rep.WriteRoot, 1)
	rep.ReadVolumeMBps, rep.ReadRootMBps = mbps(rep.ReadVolume, readPasses), mbps(rep.ReadRoot, readPasses)
	if rep.WriteRootMBps > 0 {
		rep.WriteRatio = round2(rep.WriteVolumeMBps / rep.WriteRootMBps)
	}
	if rep.ReadRootMBps > 0 {
		rep.ReadRatio = round2(rep.ReadVolumeMBps / rep.ReadRootMBps)
	}
	return rep, nil
}
