package polycrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrorItem is one entry of the API's error envelope.
type ErrorItem struct {
	Code   string  `json:"code"`
	Detail string  `json:"detail"`
	Attr   *string `json:"attr"`
}

// APIError is an answer of the API outside the success codes. Its message names
// the method, path, status and the API's error items — never the token.
type APIError struct {
	Method     string
	Path       string
	StatusCode int
	// Type is validation_error, client_error or server_error.
	Type   string
	Errors []ErrorItem
	// RetryAfter is the Retry-After header, when sent.
	RetryAfter time.Duration
	// Raw is the start of a body that was not an error envelope.
	Raw string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Polycrate API %s %s: %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	for i, it := range e.Errors {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if it.Attr != nil && *it.Attr != "" {
			fmt.Fprintf(&b, "%s: ", *it.Attr)
		}
		fmt.Fprintf(&b, "%s (%s)", it.Detail, it.Code)
	}
	if len(e.Errors) == 0 && e.Raw != "" {
		fmt.Fprintf(&b, ": %s", e.Raw)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

func newAPIError(method, path string, resp *http.Response, body []byte) *APIError {
	e := &APIError{Method: method, Path: path, StatusCode: resp.StatusCode}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(body, &top)
	var env struct {
		Type   string      `json:"type"`
		Errors []ErrorItem `json:"errors"`
	}
	switch {
	case top["type"] != nil && json.Unmarshal(body, &env) == nil:
		// The standard envelope {type, errors: [{code, detail, attr}]}.
		e.Type, e.Errors = env.Type, env.Errors
	case top["error"] != nil:
		// SystemConfigUpdateErrors {error, errors: {key: message}}.
		e.Type = "validation_error"
		var msg string
		_ = json.Unmarshal(top["error"], &msg)
		e.Errors = append(e.Errors, ErrorItem{Code: "invalid", Detail: msg})
		var perKey map[string]any
		_ = json.Unmarshal(top["errors"], &perKey)
		keys := slices.Sorted(maps.Keys(perKey))
		for _, k := range keys {
			attr := k
			e.Errors = append(e.Errors, ErrorItem{Code: "invalid", Detail: fmt.Sprint(perKey[k]), Attr: &attr})
		}
	default:
		raw := strings.TrimSpace(string(body))
		if len(raw) > 200 {
			raw = raw[:200] + "…"
		}
		e.Raw = raw
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if secs, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(time.Until(t), time.Second)
		}
	}
	return e
}

// TransportError is a request that got no HTTP answer: refused or dropped
// connection, timeout. Always transient.
type TransportError struct {
	Method, Path string
	Err          error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("Polycrate API %s %s: %v", e.Method, e.Path, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// DecodeError is an answer the client could not decode.
type DecodeError struct {
	Method, Path string
	Err          error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("Polycrate API %s %s: unexpected answer: %v", e.Method, e.Path, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// RedirectError is a 3xx answer the client did not follow (another origin, or a
// write redirected with a code that would turn it into a GET). It is a
// configuration error: api_url should name the final URL.
type RedirectError struct {
	Method, Path string
	StatusCode   int
	Location     string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("Polycrate API %s %s: %d %s: api_url redirects to %s; redirects are not followed (a write would be lost), set api_sync.api_url to the final URL",
		e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), e.Location)
}

// IsRedirect: the API answered with a redirect the client did not follow.
func IsRedirect(err error) bool {
	var e *RedirectError
	return errors.As(err, &e)
}

// FencedError: the request was not sent, this replica's leadership is not
// confirmed (ErrFenced). Not an API failure; the work waits for a leader.
type FencedError struct {
	Method, Path string
	Err          error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("Polycrate API %s %s not sent: %v", e.Method, e.Path, e.Err)
}

func (e *FencedError) Unwrap() error { return e.Err }

// TokenError means the token could not be read (missing Secret or key).
type TokenError struct{ Err error }

func (e *TokenError) Error() string { return "Polycrate API token unavailable: " + e.Err.Error() }

func (e *TokenError) Unwrap() error { return e.Err }

func statusOf(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsNotFound: 404 (or an object the API soft-deleted).
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsConflict: 409, e.g. a unique constraint: the object already exists.
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

// IsUnauthorized: 401, the token is missing or invalid.
func IsUnauthorized(err error) bool { return statusOf(err) == http.StatusUnauthorized }

// IsForbidden: 403, e.g. "No workspace found" or a permission the token lacks.
func IsForbidden(err error) bool { return statusOf(err) == http.StatusForbidden }

// IsValidation: 400, the request was invalid.
func IsValidation(err error) bool { return statusOf(err) == http.StatusBadRequest }

// IsTransient: worth retrying later unchanged — 5xx, 429, no answer at all, or
// held back by the open circuit breaker.
func IsTransient(err error) bool {
	var te *TransportError
	var open *CircuitOpenError
	if errors.As(err, &te) || errors.As(err, &open) {
		return true
	}
	s := statusOf(err)
	return s >= 500 || s == http.StatusTooManyRequests
}

// RetryAfter is the wait the API asked for, if any.
func RetryAfter(err error) time.Duration {
	var e *APIError
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// IgnoreNotFound returns nil for a 404: cleanup treats "already gone" as done.
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// DecodeAPIError builds the error for an answer outside the success codes (exported
// for the shared test vectors).
func DecodeAPIError(method, path string, status int, header http.Header, body []byte) error {
	return newAPIError(method, path, &http.Response{StatusCode: status, Header: header}, body)
}
