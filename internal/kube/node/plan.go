package node

// What one pass of the sandbox sync does, decided from the node's records
// (SQLite, the truth) and its Sandbox objects, without any I/O: the loop
// in sync.go carries the plan out.

import (
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// Metadata a node writes into a sandbox it creates for a Sandbox object:
// the object's uid is how a restarted daemon finds the sandbox it already
// made for an object instead of making a second one.
const (
	MetaObjectUID  = "warren.dev/object-uid"
	MetaObjectName = "warren.dev/object-name"
)

// plan is one pass of the sandbox sync.
type plan struct {
	// publish: objects to make (Object.UID empty) or bring up to date with
	// their sandbox's record.
	publish []publication
	// start: objects assigned to the node whose sandbox is to be made.
	start []warrenv1.Sandbox
	// kill: sandboxes whose object is being deleted or is gone; Object is
	// nil for the latter.
	kill []killing
	// release: objects whose sandbox is gone, to let go of (finalizer off)
	// and delete.
	release []warrenv1.Sandbox
}

// publication is an object and the record it must show.
type publication struct {
	Object warrenv1.Sandbox // the current object; zero to create one
	Record store.Sandbox
}

type killing struct {
	Record store.Sandbox
	Object *warrenv1.Sandbox
}

// planSync decides a pass. objs are the Sandbox objects assigned to node
// (listed before recs, so that any object labelled with a sandbox id
// names a sandbox recs holds unless it is gone); creating says which
// objects have a create in flight, to be left alone.
func planSync(node string, objs []warrenv1.Sandbox, recs []store.Sandbox, creating func(uid string) bool) plan {
	var p plan
	byUID := map[string]*warrenv1.Sandbox{}
	byID := map[string]*warrenv1.Sandbox{}
	for i := range objs {
		o := &objs[i]
		byUID[string(o.UID)] = o
		if id := sandboxIDOf(o); id != "" {
			byID[id] = o
		}
	}
	matched := map[string]bool{}
	for _, rec := range recs {
		obj, claims := claimedObject(rec, byUID)
		if claims && obj == nil {
			p.kill = append(p.kill, killing{Record: rec})
			continue
		}
		if obj == nil {
			if obj = byID[rec.ID]; obj == nil {
				p.publish = append(p.publish, publication{Record: rec})
				continue
			}
		}
		matched[string(obj.UID)] = true
		if obj.DeletionTimestamp != nil {
			p.kill = append(p.kill, killing{Record: rec, Object: obj})
			continue
		}
		p.publish = append(p.publish, publication{Object: *obj, Record: rec})
	}
	for _, o := range objs {
		if matched[string(o.UID)] || creating(string(o.UID)) {
			continue
		}
		switch {
		case o.DeletionTimestamp != nil || sandboxIDOf(&o) != "":
			// Its sandbox never was (a create failed or never ran), or
			// was destroyed: the object goes too. Only objects the node
			// labelled as its own, or that it is asked to delete.
			if o.DeletionTimestamp != nil || o.Labels[fleet.LabelNode] == node {
				p.release = append(p.release, o)
			}
		case !failedAtGeneration(o):
			p.start = append(p.start, o)
		}
	}
	return p
}

// claimedObject is the object a sandbox was made for, found by the uid in
// its metadata (claims: it names one; obj nil: that object is gone). The
// metadata of an API create is the caller's to write, so a sandbox claims
// an object only if its team is the object's: a caller cannot pass its
// sandbox off as another team's object.
func claimedObject(rec store.Sandbox, byUID map[string]*warrenv1.Sandbox) (obj *warrenv1.Sandbox, claims bool) {
	uid := rec.Metadata[MetaObjectUID]
	if uid == "" {
		return nil, false
	}
	obj = byUID[uid]
	if obj != nil && teamOf(*obj) != rec.Team {
		return nil, false
	}
	return obj, true
}

// teamOf is the team a Sandbox object's sandbox belongs to.
func teamOf(o warrenv1.Sandbox) string {
	if t := o.Labels[fleet.LabelTeam]; t != "" {
		return t
	}
	return fleet.AdminTeam
}

// sandboxIDOf is the sandbox an object stands for ("" = none made yet).
func sandboxIDOf(o *warrenv1.Sandbox) string {
	if o.Status.SandboxID != "" {
		return o.Status.SandboxID
	}
	return o.Labels[fleet.LabelSandboxID]
}

// failedAtGeneration: the node tried to make this object's sandbox and
// failed; it tries again only when the spec changes.
func failedAtGeneration(o warrenv1.Sandbox) bool {
	return o.Status.Phase == warrenv1.SandboxFailed && o.Status.ObservedGeneration == o.Generation
}

// phaseOf maps a sandbox's state to the object's phase.
func phaseOf(st store.SandboxState) warrenv1.SandboxPhase {
	switch st {
	case store.StateCreating:
		return warrenv1.SandboxCreating
	case store.StateRunning:
		return warrenv1.SandboxRunning
	case store.StatePaused:
		return warrenv1.SandboxPaused
	case store.StateHibernated:
		return warrenv1.SandboxHibernated
	case store.StateStopped:
		return warrenv1.SandboxStopped
	case store.StateFailed:
		return warrenv1.SandboxFailed
	case store.StateDestroyed:
		return warrenv1.SandboxDestroyed
	}
	return warrenv1.SandboxPending
}

// originOf says who made the object (uid; "" for one the node is about to
// make) of a record.
func originOf(rec store.Sandbox, uid types.UID) string {
	if uid != "" && rec.Metadata[MetaObjectUID] == string(uid) {
		return fleet.OriginKube
	}
	return fleet.OriginAPI
}

// desiredLabels are the labels of a record's object: old's, with warren's
// set. A value Kubernetes would refuse (a team or template name ending in
// '-', say) is left out rather than failing the object.
func desiredLabels(old map[string]string, node string, rec store.Sandbox, uid types.UID) map[string]string {
	out := maps.Clone(old)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range map[string]string{
		fleet.LabelNode:      node,
		fleet.LabelSandboxID: rec.ID,
		fleet.LabelTeam:      rec.Team,
		fleet.LabelTemplate:  rec.Template,
		fleet.LabelOrigin:    originOf(rec, uid),
	} {
		if len(validation.IsValidLabelValue(v)) == 0 {
			out[k] = v
		}
	}
	return out
}

// newObject is the object a node makes for a sandbox created through its
// API: named by the sandbox's id, on this node, with the finalizer that
// makes a delete of the object kill the sandbox first.
func newObject(namespace, node string, rec store.Sandbox) warrenv1.Sandbox {
	o := warrenv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{
			Name: rec.ID, Namespace: namespace,
			Labels:     desiredLabels(nil, node, rec, ""),
			Finalizers: []string{fleet.Finalizer},
		},
		Spec: warrenv1.SandboxSpec{
			Template: rec.Template, Runtime: rec.Runtime, NodeName: node,
			Metadata: rec.Metadata,
		},
	}
	if rec.MemoryBytes > 0 || rec.CPUMillis > 0 || rec.Pids > 0 {
		l := &warrenv1.SandboxLimits{}
		if rec.MemoryBytes > 0 {
			l.Memory = resource.NewQuantity(rec.MemoryBytes, resource.BinarySI)
		}
		if rec.CPUMillis > 0 {
			l.CPU = resource.NewMilliQuantity(rec.CPUMillis, resource.DecimalSI)
		}
		if rec.Pids > 0 {
			l.Pids = &rec.Pids
		}
		o.Spec.Limits = l
	}
	return o
}

// desiredStatus is the status a record gives its object, keeping the
// Ready condition's transition time while it holds.
func desiredStatus(old warrenv1.SandboxStatus, generation int64, node, endpoint string, rec store.Sandbox) warrenv1.SandboxStatus {
	phase := phaseOf(rec.State)
	st := warrenv1.SandboxStatus{
		Phase:              phase,
		Node:               node,
		SandboxID:          rec.ID,
		Runtime:            rec.Runtime,
		Endpoint:           endpoint,
		LastSnapshot:       rec.Head,
		Replica:            old.Replica, // the controller's to write
		ObservedGeneration: generation,
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
	}
	if !rec.StartedAt.IsZero() {
		// The API server keeps seconds: a finer time would differ from
		// what is read back on every pass.
		t := metav1.NewTime(rec.StartedAt.Truncate(time.Second))
		st.StartedAt = &t
	}
	ready := metav1.Condition{Type: warrenv1.SandboxReady, Status: metav1.ConditionFalse, Reason: string(phase),
		Message: "the sandbox is " + string(rec.State), ObservedGeneration: generation}
	if phase == warrenv1.SandboxRunning {
		ready.Status = metav1.ConditionTrue
	}
	switch {
	case rec.State == store.StateFailed && rec.Reason != "":
		ready.Message = "the sandbox failed: " + rec.Reason
	case rec.Reason != "":
		// A paused sandbox moved from another node says what did not move.
		ready.Message += ": " + rec.Reason
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	return st
}

// statusDiffers reports whether writing want over have changes anything.
func statusDiffers(have, want warrenv1.SandboxStatus) bool {
	return !equality.Semantic.DeepEqual(have, want)
}

// adoptGrace is how long after a sandbox was adopted from node X (a move
// or a restore) an object that still names X is taken for one whose
// repoint is on its way, not for a sign that the sandbox went elsewhere.
const adoptGrace = 2 * time.Minute

// staleCopy decides about a sandbox this node holds whose object (o, of
// the same name) names another node: true if the sandbox lives there now
// — restored from its replica while this node was lost, or moved — so
// that this node's copy must go rather than run twice; false if the object
// is not this sandbox's, is not placed, or is the object of a sandbox just
// adopted here whose repoint has not landed yet.
func staleCopy(node string, o warrenv1.Sandbox, rec store.Sandbox, now time.Time) bool {
	switch {
	case sandboxIDOf(&o) != rec.ID, teamOf(o) != rec.Team:
		return false
	case o.Spec.NodeName == "", o.Spec.NodeName == node:
		return false
	case rec.Metadata[session.MetaMovedFrom] == o.Spec.NodeName && now.Sub(rec.UpdatedAt) < adoptGrace:
		return false
	}
	return true
}
