// Package polycrate is the typed client of the Polycrate API. It is the only code
// of the operator that speaks HTTP to the API. It is lenient with responses
// (unknown fields are ignored, so a newer API does not break it), follows
// pagination, honours Retry-After, types its errors so reconcilers can tell
// permanent from transient failures, and never puts the token in a log or error.
package polycrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TokenSource returns the bearer token for a request; called per request so a
// rotated token takes effect at once.
type TokenSource func(ctx context.Context) (string, error)

// StaticToken is a TokenSource for a fixed token.
func StaticToken(token string) TokenSource {
	return func(context.Context) (string, error) { return token, nil }
}

// Options configure a Client.
type Options struct {
	// BaseURL is the API's root, e.g. https://api.polycrate.io (no /api/v1).
	BaseURL string
	// Token authenticates every request as "Authorization: Bearer <token>".
	Token TokenSource
	// HTTPClient is the transport; default a client with sane timeouts.
	HTTPClient *http.Client
	// Timeout bounds each request (default 15 s).
	Timeout time.Duration
	// UserAgent identifies the operator and its version.
	UserAgent string
	// MaxRetries is how often a 429 (or a 503 with Retry-After) is retried after
	// waiting Retry-After, and how often a failed GET is retried (default 3).
	MaxRetries int
	// MaxRetryWait caps one wait; a longer Retry-After is returned to the caller
	// as a rate-limit error carrying it (default 30 s).
	MaxRetryWait time.Duration
	// Metrics records requests; nil records nothing.
	Metrics *Metrics
	// OnAnswer, when set, learns of every request's outcome: serving is true when
	// the API answered with anything but a 5xx or 429 (it is up), false when it
	// did not answer or answered so. resource is the metrics label.
	OnAnswer func(resource string, serving bool)
	// Breaker, when set, holds requests back while the API fails (breaker.go);
	// shared by every client of one API.
	Breaker *Breaker
	// Fence, when set, is asked right before any byte goes to the network: an
	// error (wrapping ErrFenced) refuses it. The leader's connection uses it so a
	// replica whose leadership is not confirmed — paused, then resumed after a
	// standby took over — never finishes a write it had begun (internal/manager).
	Fence func() error
}

// ErrFenced: the request was refused before it was sent because this replica's
// leadership is not confirmed (Options.Fence). Nothing reached the API.
var ErrFenced = errors.New("this replica may not talk to the Polycrate API as the leader")

// fencedConn asks the fence before each write to the connection: the window
// between the check and the bytes leaving is a few microseconds, not a request's
// whole preparation.
type fencedConn struct {
	net.Conn
	fence func() error
}

func (c fencedConn) Write(b []byte) (int, error) {
	if err := c.fence(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// withFence returns the client with its transport's connections fenced.
func withFence(hc *http.Client, fence func() error) *http.Client {
	tr, ok := hc.Transport.(*http.Transport)
	if !ok || tr == nil {
		tr = http.DefaultTransport.(*http.Transport)
	}
	tr = tr.Clone()
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return fencedConn{Conn: conn, fence: fence}, nil
	}
	hc.Transport = tr
	return hc
}

// Client talks to one Polycrate API.
type Client struct {
	base  *url.URL
	opts  Options
	http  *http.Client
	sleep func(ctx context.Context, d time.Duration) error
}

// New builds a client.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(opts.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid Polycrate API URL %q: want e.g. https://api.polycrate.io", opts.BaseURL)
	}
	if opts.Token == nil {
		return nil, errors.New("polycrate client: no token source")
	}
	if opts.Timeout == 0 {
		opts.Timeout = 15 * time.Second
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 3
	}
	if opts.MaxRetryWait == 0 {
		opts.MaxRetryWait = 30 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "polycrate-operator"
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	} else {
		cp := *hc // the redirect policy below is the client's own; never change the caller's
		hc = &cp
	}
	hc.CheckRedirect = sameOriginRedirect
	if opts.Fence != nil {
		hc = withFence(hc, opts.Fence)
	}
	return &Client{base: u, opts: opts, http: hc, sleep: sleepCtx}, nil
}

// sameOriginRedirect is the client's redirect policy. Go's default follows a
// 301/302/303 of a POST or PUT as a GET: the write is silently lost, and a 200 of
// that GET reads as success (an endpoint "synced" with no id). It would also send
// the token to another origin. So only a redirect to the same scheme, host and
// port is followed, and for a write only 307/308 (they keep the method and body);
// anything else comes back as the 3xx answer itself, which do turns into a
// RedirectError naming the Location.
func sameOriginRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	switch {
	case len(via) >= 5:
		return http.ErrUseLastResponse
	case req.URL.Scheme != first.URL.Scheme || req.URL.Host != first.URL.Host:
		return http.ErrUseLastResponse
	case first.Method != http.MethodGet && first.Method != http.MethodHead &&
		(req.Method != first.Method || (req.Response != nil && req.Response.StatusCode != http.StatusTemporaryRedirect &&
			req.Response.StatusCode != http.StatusPermanentRedirect)):
		return http.ErrUseLastResponse
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// call is one API request.
type call struct {
	resource string // metrics label, e.g. "endpoints"
	method   string
	path     string // absolute path with trailing slash, e.g. /api/v1/endpoints/
	query    url.Values
	header   http.Header
	body     any
	accept   []int // success codes; default 200, 201, 202, 204
}

// do performs a call and returns the body of a successful answer.
func (c *Client) do(ctx context.Context, cl call) ([]byte, error) {
	var payload []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return nil, fmt.Errorf("encoding %s %s: %w", cl.method, cl.path, err)
		}
		payload = b
	}
	idempotent := cl.method == http.MethodGet || cl.method == http.MethodHead
	var last error
	for attempt := 0; ; attempt++ {
		probe, held := c.opts.Breaker.allow()
		if held != nil {
			if last != nil {
				return nil, last // a retry the opened breaker stopped: the real failure says more
			}
			return nil, held
		}
		body, err := c.once(ctx, cl, payload)
		c.opts.Breaker.done(probe, requestKind{resource: cl.resource, write: !idempotent}, breakerOutcome(ctx, err), RetryAfter(err), failureCause(cl, err))
		if err == nil {
			return body, nil
		}
		last = err
		var apiErr *APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.RetryAfter > 0 && (apiErr.StatusCode == http.StatusTooManyRequests || apiErr.StatusCode == http.StatusServiceUnavailable):
			if attempt >= c.opts.MaxRetries || apiErr.RetryAfter > c.opts.MaxRetryWait {
				return nil, err
			}
			if serr := c.sleep(ctx, apiErr.RetryAfter); serr != nil {
				return nil, err
			}
		case idempotent && IsTransient(err) && attempt < c.opts.MaxRetries:
			if serr := c.sleep(ctx, time.Duration(200*(1<<attempt))*time.Millisecond); serr != nil {
				return nil, err
			}
		default:
			return nil, err
		}
	}
}

func (c *Client) once(ctx context.Context, cl call, payload []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + cl.path
	u.RawQuery = cl.query.Encode()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u.String(), rd)
	if err != nil {
		return nil, &TransportError{Method: cl.method, Path: cl.path, Err: err}
	}
	for k, v := range cl.header {
		req.Header[k] = v
	}
	token, err := c.opts.Token(ctx)
	if err != nil {
		return nil, &TokenError{Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.opts.UserAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil && errors.Is(err, ErrFenced) {
		return nil, &FencedError{Method: cl.method, Path: cl.path, Err: scrubURL(err)}
	}
	if err != nil {
		c.opts.Metrics.observe(cl.resource, cl.method, "error", time.Since(start))
		c.answered(cl.resource, false)
		return nil, &TransportError{Method: cl.method, Path: cl.path, Err: scrubURL(err)}
	}
	defer func() { _ = resp.Body.Close() }()
	c.answered(cl.resource, resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests)
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	c.opts.Metrics.observe(cl.resource, cl.method, strconv.Itoa(resp.StatusCode), time.Since(start))
	if err != nil {
		return nil, &TransportError{Method: cl.method, Path: cl.path, Err: err}
	}
	accept := cl.accept
	if accept == nil {
		accept = []int{http.StatusOK, http.StatusCreated, http.StatusAccepted, http.StatusNoContent}
	}
	for _, code := range accept {
		if resp.StatusCode == code {
			return body, nil
		}
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return nil, &RedirectError{Method: cl.method, Path: cl.path, StatusCode: resp.StatusCode, Location: location(resp)}
	}
	return nil, newAPIError(cl.method, cl.path, resp, body)
}

// breakerOutcome is what a request's result says of the API.
func breakerOutcome(ctx context.Context, err error) outcome {
	var te *TransportError
	var tok *TokenError
	switch {
	case err == nil:
		return served
	case errors.As(err, &tok), errors.Is(err, ErrFenced), ctx.Err() != nil:
		return abandoned // nothing was sent, or the caller gave up
	case errors.As(err, &te):
		return failed
	case IsTransient(err):
		return failed // 5xx, 429
	default:
		return served // any other answer: the API serves
	}
}

// failureCause names a failure for the breaker's log line and condition.
func failureCause(cl call, err error) string {
	if err == nil {
		return ""
	}
	if s := statusOf(err); s != 0 {
		return fmt.Sprintf("%s %s answered %d", cl.method, cl.path, s)
	}
	return err.Error()
}

func (c *Client) answered(resource string, serving bool) {
	if c.opts.OnAnswer != nil {
		c.opts.OnAnswer(resource, serving)
	}
}

// location is the redirect target without credentials or query (which could
// carry something request-specific), resolved against the request's URL.
func location(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil {
		return "(no Location header)"
	}
	loc.User, loc.RawQuery, loc.Fragment = nil, "", ""
	return loc.String()
}

// scrubURL drops the query of a *url.Error so nothing request-specific leaks into logs.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// Ping is the cheapest request that shows whether the API answers: one page of
// one PoP. Any answer but a 5xx or 429 means it does (the breaker's probe).
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.do(ctx, call{resource: "ping", method: http.MethodGet, path: "/api/v1/pops/", query: url.Values{"page_size": {"1"}}})
	return err
}

// getJSON decodes a GET.
func (c *Client) getJSON(ctx context.Context, resource, path string, query url.Values, out any) error {
	body, err := c.do(ctx, call{resource: resource, method: http.MethodGet, path: path, query: query})
	if err != nil {
		return err
	}
	return decode(body, out, http.MethodGet, path)
}

// send performs a write and decodes the answer into out (nil: ignore the body).
func (c *Client) send(ctx context.Context, resource, method, path string, body, out any) error {
	b, err := c.do(ctx, call{resource: resource, method: method, path: path, body: body})
	if err != nil {
		return err
	}
	if out == nil || len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return decode(b, out, method, path)
}

func decode(b []byte, out any, method, path string) error {
	if err := json.Unmarshal(b, out); err != nil {
		return &DecodeError{Method: method, Path: path, Err: err}
	}
	return nil
}

// page is a DRF page-number page.
type page[T any] struct {
	Count    int     `json:"count"`
	Next     *string `json:"next"`
	Previous *string `json:"previous"`
	Results  []T     `json:"results"`
}

// listAll follows `next` until the last page. next must point to the same API.
func listAll[T any](ctx context.Context, c *Client, resource, path string, query url.Values) ([]T, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	if q.Get("page_size") == "" {
		q.Set("page_size", "500")
	}
	var all []T
	for pages := 0; ; pages++ {
		if pages > 10000 {
			return nil, fmt.Errorf("listing %s: more than 10000 pages, giving up", path)
		}
		var p page[T]
		if err := c.getJSON(ctx, resource, path, q, &p); err != nil {
			return nil, err
		}
		all = append(all, p.Results...)
		if p.Next == nil || *p.Next == "" {
			return all, nil
		}
		next, err := url.Parse(*p.Next)
		if err != nil {
			return nil, &DecodeError{Method: http.MethodGet, Path: path, Err: fmt.Errorf("invalid next link: %w", err)}
		}
		// The API builds next from its own view of the request host; only its path and
		// query are used, always against the configured base URL.
		rel := strings.TrimPrefix(next.Path, strings.TrimRight(c.base.Path, "/"))
		if rel != path {
			return nil, &DecodeError{Method: http.MethodGet, Path: path, Err: fmt.Errorf("the next link points to another path %q", next.Path)}
		}
		q = next.Query()
	}
}
