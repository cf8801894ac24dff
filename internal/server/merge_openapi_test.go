package server

import (
	"reflect"

	"github.com/warrenhq/warren/client"
)

// The merge routes' types (kept here so that the shared table's lines stay
// untouched).
func init() {
	for name, t := range map[string]reflect.Type{
		"client.MergeRequest": reflect.TypeFor[client.MergeRequest](),
		"client.MergeEntry":   reflect.TypeFor[client.MergeEntry](),
		"client.MergeResult":  reflect.TypeFor[client.MergeResult](),
		"client.ForkVerdict":  reflect.TypeFor[client.ForkVerdict](),
		"client.ForksSummary": reflect.TypeFor[client.ForksSummary](),
	} {
		openAPIGoTypes[name] = t
	}
}
