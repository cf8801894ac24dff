package manifeststest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The only resources a ClusterRole may name: cluster-scoped ones. Anything
// namespaced goes in a Role of the warren namespace.
var clusterScoped = []string{"warrennodes", "warrennodes/status", "nodes"}

// Verbs that hand out more rights than they name.
var escalating = []string{"*", "escalate", "bind", "impersonate"}

// Both renders' RBAC is least privilege by construction: no wildcard, no
// escalating verb, no built-in admin role, Secrets and every other
// namespaced resource only through Roles.
func TestRBACIsLeastPrivilege(t *testing.T) {
	k, h := mustRender(t)
	for name, objs := range map[string][]*unstructured.Unstructured{"kustomize": k, "helm": h} {
		for _, o := range objs {
			for _, problem := range rbacProblems(t, o) {
				t.Errorf("%s: %s: %s", name, id(o), problem)
			}
		}
	}
}

func rbacProblems(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	var problems []string
	switch o.GetKind() {
	case "Role", "ClusterRole":
		var role rbacv1.ClusterRole // a Role's rules have the same shape
		fromUnstructured(t, o, &role)
		if role.AggregationRule != nil {
			problems = append(problems, "aggregates other roles")
		}
		for _, r := range role.Rules {
			problems = append(problems, ruleProblems(o.GetKind(), r)...)
		}
	case "RoleBinding", "ClusterRoleBinding":
		var b rbacv1.ClusterRoleBinding
		fromUnstructured(t, o, &b)
		if !strings.HasPrefix(b.RoleRef.Name, "warren-") {
			problems = append(problems, fmt.Sprintf("binds %s %s, not one of warren's roles", b.RoleRef.Kind, b.RoleRef.Name))
		}
		for _, s := range b.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind || !strings.HasPrefix(s.Name, "warren-") {
				problems = append(problems, fmt.Sprintf("binds %s %s, not one of warren's service accounts", s.Kind, s.Name))
			}
		}
	}
	return problems
}

func ruleProblems(kind string, r rbacv1.PolicyRule) []string {
	var problems []string
	for _, list := range [][]string{r.APIGroups, r.Resources, r.ResourceNames} {
		if slices.Contains(list, "*") {
			problems = append(problems, fmt.Sprintf("wildcard in %v", r))
		}
	}
	for _, v := range r.Verbs {
		if slices.Contains(escalating, v) {
			problems = append(problems, fmt.Sprintf("verb %q in %v", v, r))
		}
	}
	if len(r.NonResourceURLs) > 0 {
		problems = append(problems, fmt.Sprintf("non-resource URLs %v", r.NonResourceURLs))
	}
	if kind == "ClusterRole" {
		for _, res := range r.Resources {
			if !slices.Contains(clusterScoped, res) {
				problems = append(problems, fmt.Sprintf("namespaced resource %q in a ClusterRole (every namespace)", res))
			}
		}
	}
	return problems
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("%s: %v", id(o), err)
	}
}

// access is one question to the API server's authorizer.
type access struct {
	namespace, group, resource, subresource, name, verb string
	allowed                                             bool
}

// The applied RBAC, asked of the real authorizer (SubjectAccessReview): each
// service account may do what its component does, in the warren namespace,
// and not the nearby things it does not need.
func TestRBACGrantsWhatEachComponentNeeds(t *testing.T) {
	e := plane.Get(t)
	ctx := context.Background()
	objs, err := renderKustomize(kustomizeBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			if err := apply(ctx, e.Client, o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	const ns = "warren"
	node := []access{
		{ns, "coordination.k8s.io", "leases", "", "warren-node-a", "update", true},
		{ns, "coordination.k8s.io", "leases", "", "", "create", true},
		{ns, "warren.dev", "sandboxes", "", "", "watch", true},
		{ns, "warren.dev", "sandboxes", "status", "x", "update", true},
		{ns, "warren.dev", "sandboxes", "finalizers", "x", "update", true},
		{ns, "warren.dev", "sandboxes", "", "x", "delete", true},
		{ns, "", "secrets", "", "", "list", true},
		{ns, "", "secrets", "", "", "create", true},
		{"", "warren.dev", "warrennodes", "status", "a", "update", true},
		{"", "", "nodes", "", "a", "get", true},
		{ns, "", "secrets", "", "k", "delete", false},
		{ns, "", "secrets", "", "k", "update", false},
		{"kube-system", "", "secrets", "", "", "list", false},
		{"", "", "secrets", "", "", "list", false}, // every namespace
		{"other", "warren.dev", "sandboxes", "", "", "list", false},
		{ns, "", "pods", "", "", "create", false},
		{"", "", "nodes", "", "a", "update", false},
		{"", "warren.dev", "warrennodes", "", "a", "delete", false},
		{ns, "warren.dev", "sandboxpools", "", "", "list", true},
		{ns, "warren.dev", "sandboxpools", "status", "p", "update", true},
		{ns, "warren.dev", "sandboxpools", "", "p", "delete", false},
	}
	gateway := []access{
		{ns, "coordination.k8s.io", "leases", "", "", "watch", true},
		{ns, "coordination.k8s.io", "leases", "", "warren-controller", "update", true},
		{ns, "warren.dev", "sandboxes", "", "x", "patch", true},
		{ns, "warren.dev", "sandboxes", "status", "x", "patch", true},
		{ns, "", "secrets", "", "k", "delete", true},
		{"", "warren.dev", "warrennodes", "", "", "watch", true},
		{"", "warren.dev", "warrennodes", "status", "a", "update", true},
		{ns, "coordination.k8s.io", "leases", "", "warren-node-a", "update", false},
		{ns, "warren.dev", "sandboxes", "", "x", "delete", false},
		{ns, "warren.dev", "sandboxes", "", "", "create", false},
		{ns, "", "secrets", "", "k", "update", false},
		{"kube-system", "", "secrets", "", "", "get", false},
		{"", "", "secrets", "", "", "list", false},
		{"", "warren.dev", "warrennodes", "", "a", "update", false},
		{"", "", "nodes", "", "", "list", true}, // the drainer follows cordons
		{"", "", "nodes", "", "a", "patch", false},
	}
	for sa, questions := range map[string][]access{"warren-node": node, "warren-gateway": gateway} {
		user := "system:serviceaccount:" + ns + ":" + sa
		for _, q := range questions {
			sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authzv1.ResourceAttributes{
					Namespace: q.namespace, Group: q.group, Resource: q.resource,
					Subresource: q.subresource, Name: q.name, Verb: q.verb,
				},
			}}
			if err := e.Client.Create(ctx, sar); err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed != q.allowed {
				t.Errorf("%s may %s %s/%s (%q in namespace %q): %v, want %v (%s)", sa, q.verb, q.resource, q.subresource,
					q.name, q.namespace, sar.Status.Allowed, q.allowed, sar.Status.Reason)
			}
		}
	}
}
