package client

import "time"

// TemplateDetail is one template built from steps with all its builds,
// newest first (GET /templates/{id}, warren template show).
type TemplateDetail struct {
	Template Template        `json:"template"`
	Builds   []TemplateBuild `json:"builds"`
}

// TemplateBuild is one build of a template built from steps.
type TemplateBuild struct {
	BuildID string `json:"buildID"`
	// Status: waiting, building, ready or error (then Reason says why).
	Status string   `json:"status"`
	Reason string   `json:"reason,omitempty"`
	Tags   []string `json:"tags,omitempty"`
	// Steps is how many steps it has, CachedSteps how many of them came
	// from the step cache.
	Steps       int             `json:"steps"`
	CachedSteps int             `json:"cachedSteps"`
	Parent      *TemplateParent `json:"parent,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
	StartedAt   *time.Time      `json:"startedAt,omitempty"`
	FinishedAt  *time.Time      `json:"finishedAt,omitempty"`
	// DurationMs is from its start to its end (a finished build).
	DurationMs int64 `json:"durationMs,omitempty"`
}

// TemplateParent is what a build started from: one of the server's
// templates (kind "template", Name), a build of another of the team's
// built templates (kind "build": Name, TemplateID, BuildID), or an
// image (Image).
type TemplateParent struct {
	Kind       string `json:"kind"`
	Name       string `json:"name,omitempty"`
	TemplateID string `json:"templateID,omitempty"`
	BuildID    string `json:"buildID,omitempty"`
	Image      string `json:"image,omitempty"`
}
