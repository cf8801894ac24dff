package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// kind is the JSON type of one parameter. The tools need only these four,
// so the schema served to models and the check applied to their calls are
// generated from the same small description and cannot drift apart.
type kind int

const (
	kString kind = iota
	kInteger
	kBoolean
	kStringMap // an object whose values are strings (bash's env)
)

// param describes one field of a tool's params object.
type param struct {
	name     string
	kind     kind
	required bool
	nonEmpty bool // strings: "" is refused
	min, max int64
	hasMin   bool
	hasMax   bool
	desc     string
}

func str(name, desc string) param { return param{name: name, kind: kString, desc: desc} }
func integer(name, desc string, min, max int64) param {
	return param{name: name, kind: kInteger, desc: desc, min: min, max: max, hasMin: true, hasMax: true}
}
func boolean(name, desc string) param { return param{name: name, kind: kBoolean, desc: desc} }
func stringMap(name, desc string) param {
	return param{name: name, kind: kStringMap, desc: desc}
}

// req marks a parameter as required and, for strings, non-empty.
func (p param) req() param {
	p.required = true
	p.nonEmpty = p.kind == kString
	return p
}

// reqMayBeEmpty marks a string as required but allows "".
func (p param) reqMayBeEmpty() param {
	p.required = true
	return p
}

// schema renders params as a JSON Schema object.
func schema(params []param) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	for _, p := range params {
		s := map[string]any{"description": p.desc}
		switch p.kind {
		case kString:
			s["type"] = "string"
			if p.nonEmpty {
				s["minLength"] = 1
			}
		case kInteger:
			s["type"] = "integer"
			if p.hasMin {
				s["minimum"] = p.min
			}
			if p.hasMax {
				s["maximum"] = p.max
			}
		case kBoolean:
			s["type"] = "boolean"
		case kStringMap:
			s["type"] = "object"
			s["additionalProperties"] = map[string]any{"type": "string"}
		}
		props[p.name] = s
		if p.required {
			required = append(required, p.name)
		}
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	b, err := json.Marshal(out) // maps marshal with sorted keys: stable output
	if err != nil {
		panic(err) // only literal values above: a bug, not input
	}
	return b
}

// paramError is a call whose params do not fit the tool's schema: the
// caller's mistake, answered as InvalidArgument naming the field.
type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }

func badParams(format string, args ...any) error {
	return &paramError{msg: fmt.Sprintf(format, args...)}
}

// check validates raw against params: a JSON object (or nothing, meaning
// {}), no unknown fields, required fields present, every value of its
// declared type and range. null counts as absent. It returns the object
// normalised for decoding (nulls dropped).
func check(tool string, params []param, raw []byte) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return nil, badParams("params must be a JSON object, got %s", jsonType(raw))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, badParams("params are not valid JSON: %v", err)
	}
	byName := make(map[string]param, len(params))
	for _, p := range params {
		byName[p.name] = p
	}
	var unknown []string
	for name, v := range fields {
		if string(v) == "null" {
			delete(fields, name)
			continue
		}
		if _, ok := byName[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, badParams("params: unknown field %s for tool %s (its fields are: %s)",
			quoteList(unknown), tool, fieldNames(params))
	}
	for _, p := range params {
		v, ok := fields[p.name]
		if !ok {
			if p.required {
				return nil, badParams("params.%s is required", p.name)
			}
			continue
		}
		if err := p.check(v); err != nil {
			return nil, err
		}
	}
	out, err := json.Marshal(fields)
	if err != nil {
		return nil, badParams("params: %v", err)
	}
	return out, nil
}

func (p param) check(v json.RawMessage) error {
	switch p.kind {
	case kString:
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return badParams("params.%s must be a string, got %s", p.name, jsonType(v))
		}
		if p.nonEmpty && s == "" {
			return badParams("params.%s must not be empty", p.name)
		}
	case kInteger:
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if jsonType(v) != "a number" || d.Decode(&n) != nil {
			return badParams("params.%s must be an integer, got %s", p.name, jsonType(v))
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil {
			f, ferr := n.Float64()
			if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return badParams("params.%s must be an integer, got %s", p.name, n.String())
			}
			return badParams("params.%s must be written as an integer without a fraction or exponent, got %s", p.name, n.String())
		}
		if p.hasMin && i < p.min {
			return badParams("params.%s must be at least %d, got %d", p.name, p.min, i)
		}
		if p.hasMax && i > p.max {
			return badParams("params.%s must be at most %d, got %d", p.name, p.max, i)
		}
	case kBoolean:
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return badParams("params.%s must be true or false, got %s", p.name, jsonType(v))
		}
	case kStringMap:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return badParams("params.%s must be an object of string values, got %s", p.name, jsonType(v))
		}
		for k, e := range m {
			var s string
			if err := json.Unmarshal(e, &s); err != nil {
				return badParams("params.%s.%s must be a string, got %s", p.name, k, jsonType(e))
			}
		}
	}
	return nil
}

// decodeStrict decodes a checked params object into dst, refusing fields dst
// lacks; after check that can only fail on a bug in a tool's definition.
func decodeStrict(raw []byte, dst any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(dst); err != nil {
		return fmt.Errorf("decode params: %w", err)
	}
	if d.More() {
		return errors.New("decode params: trailing data")
	}
	return nil
}

func jsonType(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func fieldNames(params []param) string {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.name
		if p.required {
			names[i] += " (required)"
		}
	}
	return strings.Join(names, ", ")
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
