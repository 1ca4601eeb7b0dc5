package polycrate

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// SetSleep replaces the client's wait (tests record Retry-After waits instead of sleeping).
func SetSleep(c *Client, f func(ctx context.Context, d time.Duration) error) { c.sleep = f }

// The tests' readings of an error; the operator classifies with controller.Classify.

// IsRateLimited: 429.
func IsRateLimited(err error) bool { return statusOf(err) == http.StatusTooManyRequests }

// IsServerError: 5xx.
func IsServerError(err error) bool { return statusOf(err) >= 500 }

// IsPermanent: a 4xx other than 404, 409 and 429, an undecodable answer, or a redirect.
func IsPermanent(err error) bool {
	var de *DecodeError
	if errors.As(err, &de) || IsRedirect(err) {
		return true
	}
	s := statusOf(err)
	return s >= 400 && s < 500 && s != http.StatusNotFound && s != http.StatusConflict && s != http.StatusTooManyRequests
}

// ValidationErrors are the field errors of a 400.
func ValidationErrors(err error) []ErrorItem {
	var e *APIError
	if errors.As(err, &e) && e.StatusCode == http.StatusBadRequest {
		return e.Errors
	}
	return nil
}
