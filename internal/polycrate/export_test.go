package polycrate

import (
	"context"
	"time"
)

// SetSleep replaces the client's wait (tests record Retry-After waits instead of sleeping).
func SetSleep(c *Client, f func(ctx context.Context, d time.Duration) error) { c.sleep = f }
