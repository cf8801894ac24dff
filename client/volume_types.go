package client

import "time"

// VolumeMount mounts the shared volume Name at Path inside a sandbox.
type VolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// NewVolume is the body of POST /volumes.
type NewVolume struct {
	Name string `json:"name"`
	// SizeMB caps the volume (warren extension; 0: the server's
	// --volume-size-mb).
	SizeMB int64 `json:"sizeMB,omitempty"`
}

// Volume is a shared volume as GET /volumes lists it (E2B's shape plus
// warren's size fields).
type Volume struct {
	VolumeID string `json:"volumeID"`
	Name     string `json:"name"`
	// SizeMB is its cap (0: none); UsedBytes what it holds (-1: unknown).
	SizeMB    int64     `json:"sizeMB"`
	UsedBytes int64     `json:"usedBytes"`
	CreatedAt time.Time `json:"createdAt"`
}

// VolumeAndToken is a volume with the token of its content API
// (/volumecontent/{id}/..., sent as Authorization: Bearer <token>).
type VolumeAndToken struct {
	Volume
	Token string `json:"token"`
}

// VolumeEntry is one file or directory of a volume (the content API).
type VolumeEntry struct {
	Name string `json:"name"`
	// Path is absolute inside the volume.
	Path string `json:"path"`
	// Type is file, directory, symlink or unknown.
	Type string `json:"type"`
	Size int64  `json:"size"`
	// Mode holds the permission bits (with setuid, setgid and sticky).
	Mode   uint32    `json:"mode"`
	UID    uint32    `json:"uid"`
	GID    uint32    `json:"gid"`
	Atime  time.Time `json:"atime"`
	Mtime  time.Time `json:"mtime"`
	Ctime  time.Time `json:"ctime"`
	Target string    `json:"target,omitempty"`
}

// VolumeMetadata is the body of PATCH /volumecontent/{id}/path: the fields
// set change.
type VolumeMetadata struct {
	UID  *uint32 `json:"uid,omitempty"`
	GID  *uint32 `json:"gid,omitempty"`
	Mode *uint32 `json:"mode,omitempty"`
}
