package emulator

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Kind is a field's JSON type as the Polycrate API's OpenAPI schema declares it.
type Kind int

// Field kinds.
const (
	String   Kind = iota
	Int           // JSON number without a fraction
	Number        // any JSON number (decimal strings are String)
	Bool          // JSON true/false
	UUID          // string in UUID form
	DateTime      // RFC 3339 string
	Any           // any JSON value (DRF JSONField)
	Obj           // JSON object with a sub-schema (Fields)
	StrList       // JSON array of strings
	IntList       // JSON array of integers
	ObjList       // JSON array of objects with a sub-schema (Fields)
)

func (k Kind) String() string {
	return [...]string{"string", "integer", "number", "boolean", "uuid", "date-time", "any", "object", "string[]", "integer[]", "object[]"}[k]
}

// Field describes one field of a resource, as the reference states it.
type Field struct {
	Name      string
	Kind      Kind
	Null      bool     // nullable
	Required  bool     // required on create and PUT
	ReadOnly  bool     // server-set: ignored when sent, always returned
	WriteOnly bool     // accepted on write, never returned
	Slug      bool     // must match ^[a-z0-9]+(?:-[a-z0-9]+)*$
	Enum      []string // allowed values (strings)
	MaxLength int
	Min, Max  *float64 // numeric range
	FK        string   // resource name the UUID must reference (same workspace)
	Default   any      // filled on create when the field is absent
	Fields    []Field  // sub-schema of an Object field
	Doc       string   // one line for the contract document
}

// fieldOpt modifies a Field; used to keep the resource tables readable.
type fieldOpt func(*Field)

var (
	req       fieldOpt = func(f *Field) { f.Required = true }
	null      fieldOpt = func(f *Field) { f.Null = true }
	ro        fieldOpt = func(f *Field) { f.ReadOnly = true }
	wo        fieldOpt = func(f *Field) { f.WriteOnly = true }
	slug      fieldOpt = func(f *Field) { f.Slug = true }
	enum               = func(v ...string) fieldOpt { return func(f *Field) { f.Enum = v } }
	maxLen             = func(n int) fieldOpt { return func(f *Field) { f.MaxLength = n } }
	fk                 = func(res string) fieldOpt { return func(f *Field) { f.FK = res } }
	def                = func(v any) fieldOpt { return func(f *Field) { f.Default = v } }
	doc                = func(s string) fieldOpt { return func(f *Field) { f.Doc = s } }
	sub                = func(fs ...Field) fieldOpt { return func(f *Field) { f.Fields = fs } }
	rangeOf            = func(lo, hi float64) fieldOpt { return func(f *Field) { f.Min, f.Max = &lo, &hi } }
	minOf              = func(lo float64) fieldOpt { return func(f *Field) { f.Min = &lo } }
	slugRegex          = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)
)

// F builds a field.
func F(name string, kind Kind, opts ...fieldOpt) Field {
	f := Field{Name: name, Kind: kind}
	for _, o := range opts {
		o(&f)
	}
	return f
}

// FieldError is one entry of a validation_error response.
type FieldError struct {
	Attr   string `json:"attr"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// validateValue checks one JSON value against its field; attr is the dotted path.
func validateValue(f Field, v any, attr string) []FieldError {
	if v == nil {
		if f.Null || f.Kind == Any {
			return nil
		}
		return []FieldError{{attr, "null", "This field may not be null."}}
	}
	bad := func(code, detail string) []FieldError { return []FieldError{{attr, code, detail}} }
	switch f.Kind {
	case String, UUID, DateTime:
		return validateString(f, v, attr)
	case Int:
		n, ok := v.(float64)
		if !ok || n != math.Trunc(n) || math.IsInf(n, 0) {
			return bad("invalid", "A valid integer is required.")
		}
		if e := checkRange(f, n, attr); e != nil {
			return e
		}
	case Number:
		n, ok := v.(float64)
		if !ok {
			return bad("invalid", "A valid number is required.")
		}
		if e := checkRange(f, n, attr); e != nil {
			return e
		}
	case Bool:
		if _, ok := v.(bool); !ok {
			return bad("invalid", "Must be a valid boolean.")
		}
	case Obj:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("invalid", "Expected a dictionary of items.")
		}
		return validateObject(f.Fields, m, attr+".", false)
	case ObjList, StrList, IntList:
		return validateList(f, v, attr)
	case Any:
	}
	return nil
}

// validateString checks a string, UUID or date-time value.
func validateString(f Field, v any, attr string) []FieldError {
	bad := func(code, detail string) []FieldError { return []FieldError{{attr, code, detail}} }
	s, ok := v.(string)
	if !ok {
		return bad("invalid", "Not a valid string.")
	}
	switch {
	case f.Kind == UUID:
		if _, err := uuid.Parse(s); err != nil || len(s) != 36 {
			return bad("invalid", "Must be a valid UUID.")
		}
	case f.Kind == DateTime:
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return bad("invalid", "Datetime has wrong format. Use one of these formats instead: YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].")
		}
	}
	if f.Required && s == "" && f.Kind == String && len(f.Enum) == 0 {
		return bad("blank", "This field may not be blank.")
	}
	if f.MaxLength > 0 && len(s) > f.MaxLength {
		return bad("max_length", fmt.Sprintf("Ensure this field has no more than %d characters.", f.MaxLength))
	}
	if f.Slug && !slugRegex.MatchString(s) {
		return bad("invalid", `Enter a valid "slug" consisting of lower-case letters, numbers and hyphens (^[a-z0-9]+(?:-[a-z0-9]+)*$).`)
	}
	if len(f.Enum) > 0 && !contains(f.Enum, s) {
		return bad("invalid_choice", fmt.Sprintf("%q is not a valid choice.", s))
	}
	return nil
}

// validateList checks a list of objects, strings or integers, item by item.
func validateList(f Field, v any, attr string) []FieldError {
	items, ok := v.([]any)
	if !ok {
		return []FieldError{{attr, "not_a_list", "Expected a list of items."}}
	}
	var errs []FieldError
	if f.Kind == ObjList {
		for i, it := range items {
			m, isMap := it.(map[string]any)
			if !isMap {
				errs = append(errs, FieldError{fmt.Sprintf("%s.%d", attr, i), "invalid", "Expected a dictionary of items."})
				continue
			}
			errs = append(errs, validateObject(f.Fields, m, fmt.Sprintf("%s.%d.", attr, i), false)...)
		}
		return errs
	}
	elem := Field{Kind: String}
	if f.Kind == IntList {
		elem.Kind = Int
	}
	for i, it := range items {
		errs = append(errs, validateValue(elem, it, fmt.Sprintf("%s.%d", attr, i))...)
	}
	return errs
}

func checkRange(f Field, n float64, attr string) []FieldError {
	if f.Min != nil && n < *f.Min {
		return []FieldError{{attr, "min_value", fmt.Sprintf("Ensure this value is greater than or equal to %v.", *f.Min)}}
	}
	if f.Max != nil && n > *f.Max {
		return []FieldError{{attr, "max_value", fmt.Sprintf("Ensure this value is less than or equal to %v.", *f.Max)}}
	}
	return nil
}

// validateObject checks a request object: unknown names are rejected (stricter than
// the real service, to catch client typos), read-only names are dropped, types and
// required fields checked. partial is PATCH (no required check).
func validateObject(fields []Field, m map[string]any, prefix string, partial bool) []FieldError {
	byName := make(map[string]Field, len(fields))
	for _, f := range fields {
		byName[f.Name] = f
	}
	var errs []FieldError
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		f, ok := byName[k]
		if !ok {
			errs = append(errs, FieldError{prefix + k, "unknown_field", "This field does not exist on the resource (the emulator rejects unknown fields; the real API would drop them silently)."})
			continue
		}
		if f.ReadOnly {
			delete(m, k)
			continue
		}
		errs = append(errs, validateValue(f, m[k], prefix+k)...)
	}
	if !partial {
		for _, f := range fields {
			if f.Required && !f.ReadOnly {
				if _, ok := m[f.Name]; !ok {
					errs = append(errs, FieldError{prefix + f.Name, "required", "This field is required."})
				}
			}
		}
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// describe renders a field for the contract document.
func (f Field) describe() string {
	var parts []string
	t := f.Kind.String()
	if f.Kind == Obj && len(f.Fields) > 0 {
		t = "object"
	}
	parts = append(parts, t)
	if len(f.Enum) > 0 {
		parts = append(parts, "one of "+strings.Join(quoteAll(f.Enum), ", "))
	}
	if f.Null {
		parts = append(parts, "nullable")
	}
	switch {
	case f.ReadOnly:
		parts = append(parts, "read-only")
	case f.WriteOnly:
		parts = append(parts, "write-only")
	case f.Required:
		parts = append(parts, "**required**")
	}
	if f.Slug {
		parts = append(parts, "slug")
	}
	switch {
	case f.Min != nil && f.Max != nil:
		parts = append(parts, fmt.Sprintf("%v–%v", *f.Min, *f.Max))
	case f.Min != nil:
		parts = append(parts, fmt.Sprintf("≥ %v", *f.Min))
	}
	if f.MaxLength > 0 {
		parts = append(parts, fmt.Sprintf("≤ %d chars", f.MaxLength))
	}
	if f.FK != "" {
		parts = append(parts, "→ "+f.FK)
	}
	if f.Default != nil {
		parts = append(parts, fmt.Sprintf("default %v", f.Default))
	}
	return strings.Join(parts, ", ")
}

func quoteAll(v []string) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = "`" + s + "`"
	}
	return out
}
