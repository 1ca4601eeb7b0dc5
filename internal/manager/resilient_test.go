package manager

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// fakeAPIServer holds ConfigMaps with resource versions, serves lists and
// watches, and restarts: while down it refuses connections, and its watch
// cache starts anew at the current version (an older one is 410 Gone).
type fakeAPIServer struct {
	mu         sync.Mutex
	rv         int
	objs       map[string]*corev1.ConfigMap
	events     []watch.Event // every change, in order
	cacheStart int
	down       bool
	watches    []*watch.RaceFreeFakeWatcher
	lists      int
	watchCalls int
}

func newFakeAPIServer() *fakeAPIServer {
	return &fakeAPIServer{objs: map[string]*corev1.ConfigMap{}}
}

var errRefused = &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/configmaps",
	Err: &net.OpError{Op: "dial", Net: "tcp", Err: &netSyscallError{syscall.ECONNREFUSED}}}

type netSyscallError struct{ errno syscall.Errno }

func (e *netSyscallError) Error() string { return "connect: " + e.errno.Error() }
func (e *netSyscallError) Unwrap() error { return e.errno }

func (s *fakeAPIServer) change(typ watch.EventType, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: strconv.Itoa(s.rv)}}
	if typ == watch.Deleted {
		delete(s.objs, name)
	} else {
		s.objs[name] = cm
	}
	ev := watch.Event{Type: typ, Object: cm}
	s.events = append(s.events, ev)
	if !s.down {
		for _, w := range s.watches {
			if !w.IsStopped() {
				w.Action(ev.Type, ev.Object.DeepCopyObject())
			}
		}
	}
}

// restart closes every watch and refuses connections for d.
func (s *fakeAPIServer) restart(d time.Duration) {
	s.mu.Lock()
	s.down = true
	for _, w := range s.watches {
		w.Stop()
	}
	s.watches = nil
	s.mu.Unlock()
	time.Sleep(d)
	s.mu.Lock()
	s.down = false
	s.cacheStart = s.rv
	s.mu.Unlock()
}

func (s *fakeAPIServer) up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.down
}

// listOnly lists with LIST, as the Endpoint informer does (the fake serves no
// streaming list); resilientLW forwards that choice to the reflector.
type listOnly struct {
	toolscache.ListerWatcherWithContext
}

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

func (s *fakeAPIServer) lw() toolscache.ListerWatcherWithContext {
	return listOnly{toolscache.ToListerWatcherWithContext(&toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.lists++
			if s.down {
				return nil, errRefused
			}
			l := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
			names := make([]string, 0, len(s.objs))
			for n := range s.objs {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				l.Items = append(l.Items, *s.objs[n].DeepCopy())
			}
			return l, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.watchCalls++
			if s.down {
				return nil, errRefused
			}
			from, _ := strconv.Atoi(o.ResourceVersion)
			if from < s.cacheStart {
				return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.cacheStart))
			}
			w := watch.NewRaceFreeFake()
			for _, ev := range s.events {
				if rv, _ := strconv.Atoi(ev.Object.(*corev1.ConfigMap).ResourceVersion); rv > from {
					w.Action(ev.Type, ev.Object.DeepCopyObject())
				}
			}
			s.watches = append(s.watches, w)
			return w, nil
		},
	})}
}

func (s *fakeAPIServer) counts() (lists, watches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, s.watchCalls
}

// TestInformerRecoversWithinSecondsOfRepeatedRestarts: six restarts of the API
// server, each of which closes the watches and starts its watch cache anew
// (every resumed watch is 410 Gone), with objects created and deleted while it
// was down. client-go's reflector alone backs off to 25–50 s by the sixth; with
// resilientLW the informer holds what the server holds within seconds of each
// return, the deletion included, without a second list of its own.
func TestInformerRecoversWithinSecondsOfRepeatedRestarts(t *testing.T) {
	srv := newFakeAPIServer()
	for i := range 20 {
		srv.change(watch.Added, fmt.Sprintf("cm-%02d", i))
	}
	var backs atomic.Int32 // what kube.Recovery hears
	gate := &apiGate{probe: func(context.Context) error {
		if srv.up() {
			return nil
		}
		return errRefused
	}, back: func() { backs.Add(1) }}
	r := &resilientLW{inner: srv.lw(), gate: gate, example: &corev1.ConfigMap{}}
	inf := toolscache.NewSharedIndexInformer(r, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	r.store = inf.GetStore()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	holds := func(want map[string]bool, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, within, true, func(context.Context) (bool, error) {
			keys := inf.GetStore().ListKeys()
			if len(keys) != len(want) {
				return false, nil
			}
			for _, k := range keys {
				if !want[k] {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("the informer holds %v, want %d objects, after %s", inf.GetStore().ListKeys(), len(want), within)
		}
		return time.Since(start)
	}
	want := map[string]bool{}
	for i := range 20 {
		want[fmt.Sprintf("ns/cm-%02d", i)] = true
	}
	holds(want, 5*time.Second)
	lists0, _ := srv.counts()
	if n := backs.Load(); n != 0 {
		t.Errorf("the gate said the server is back %d times before it was ever away", n)
	}

	var slowest time.Duration
	for round := range 6 {
		done := make(chan struct{})
		go func() { defer close(done); srv.restart(400 * time.Millisecond) }()
		time.Sleep(100 * time.Millisecond)
		// Changes while the server is down (etcd takes them; the watch cache
		// that would replay them is gone).
		srv.change(watch.Added, fmt.Sprintf("new-%d", round))
		srv.change(watch.Deleted, fmt.Sprintf("cm-%02d", round))
		want[fmt.Sprintf("ns/new-%d", round)] = true
		delete(want, fmt.Sprintf("ns/cm-%02d", round))
		<-done
		slowest = max(slowest, holds(want, 5*time.Second))
		// A change after the return arrives through the resumed watch.
		srv.change(watch.Added, fmt.Sprintf("after-%d", round))
		want[fmt.Sprintf("ns/after-%d", round)] = true
		slowest = max(slowest, holds(want, 5*time.Second))
	}
	if slowest > 3*time.Second {
		t.Errorf("the informer took %s after the server's return", slowest)
	}
	// Each return is told (to the controllers' queues: kube.Recovery).
	if n := backs.Load(); n < 6 {
		t.Errorf("the gate said the server is back %d times after 6 restarts", n)
	}
	lists, watches := srv.counts()
	t.Logf("slowest recovery %s; %d lists (the resilient watch's own), %d watch calls", slowest, lists-lists0, watches)
	// Each restart costs the wrapper one list (the 410), the reflector none:
	// it never saw the restarts.
	if lists-lists0 > 6 {
		t.Errorf("%d lists for 6 restarts", lists-lists0)
	}
}

// TestUnavailableKnowsWhatToWaitFor: what the wrapper waits out, and what it
// hands to the reflector.
func TestUnavailableKnowsWhatToWaitFor(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errRefused, true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewServiceUnavailable("warming up"), true},
		{apierrors.NewTimeoutError("later", 1), true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{apierrors.NewForbidden(gr, "x", fmt.Errorf("no")), false},
		{apierrors.NewResourceExpired("too old"), false},
		{apierrors.NewInternalError(fmt.Errorf("conversion webhook")), false},
		{apierrors.NewBadRequest("bad selector"), false},
	} {
		if got := unavailable(c.err); got != c.want {
			t.Errorf("unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if d := retryAfter(apierrors.NewTooManyRequests("slow down", 3)); d != 3*time.Second {
		t.Errorf("retryAfter = %s", d)
	}
	if d := retryAfter(apierrors.NewTooManyRequests("slow down", 300)); d != retryAfterMax {
		t.Errorf("retryAfter = %s, want the cap", d)
	}
}

// scriptedLW hands out the watches a test made, recording each call's options.
type scriptedLW struct {
	mu      sync.Mutex
	calls   []metav1.ListOptions
	watches []*watch.RaceFreeFakeWatcher
}

func (s *scriptedLW) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return &corev1.ConfigMapList{}, nil
}

func (s *scriptedLW) WatchWithContext(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, o)
	w := watch.NewRaceFreeFake()
	s.watches = append(s.watches, w)
	return w, nil
}

func (s *scriptedLW) state() ([]metav1.ListOptions, []*watch.RaceFreeFakeWatcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metav1.ListOptions(nil), s.calls...), append([]*watch.RaceFreeFakeWatcher(nil), s.watches...)
}

// TestStreamingListResumesPastItsInitialEvents: the reflector's streaming
// list (sendInitialEvents) is resumed like any watch once its initial events
// are complete — as a plain watch from the bookmark's version — and left to
// the reflector when it ends before. Each watch has its relay from the start:
// no goroutine appears at the stream's first end (the soak's flat count).
func TestStreamingListResumesPastItsInitialEvents(t *testing.T) {
	streaming := metav1.ListOptions{SendInitialEvents: ptrTo(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks: true, TimeoutSeconds: ptrTo[int64](300)}
	cm := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	next := func(t *testing.T, w watch.Interface) watch.Event {
		t.Helper()
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("no event")
		}
		return watch.Event{}
	}

	t.Run("complete: resumed as a plain watch", func(t *testing.T) {
		s := &scriptedLW{}
		l := &resilientLW{inner: s, gate: &apiGate{}, example: &corev1.ConfigMap{}}
		w, err := l.WatchWithContext(context.Background(), streaming)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, ok := w.(*resumingWatch); !ok {
			t.Fatalf("a streaming list is not wrapped: %T", w)
		}
		_, ws := s.state()
		ws[0].Add(cm("a", "5"))
		end := cm("", "7")
		end.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
		ws[0].Action(watch.Bookmark, end)
		if ev := next(t, w); ev.Type != watch.Added {
			t.Fatalf("first event %s", ev.Type)
		}
		if ev := next(t, w); ev.Type != watch.Bookmark {
			t.Fatalf("second event %s", ev.Type)
		}
		ws[0].Stop() // the server ends the stream (its timeout)
		var calls []metav1.ListOptions
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			calls, ws = s.state()
			return len(calls) == 2, nil
		}); err != nil {
			t.Fatalf("not resumed: %d watch calls", len(calls))
		}
		got := calls[1]
		if got.ResourceVersion != "7" || got.SendInitialEvents != nil || got.ResourceVersionMatch != "" || !got.AllowWatchBookmarks ||
			got.TimeoutSeconds == nil || *got.TimeoutSeconds != 300 {
			t.Fatalf("resumed with %+v, want a plain watch from 7", got)
		}
		ws[1].Modify(cm("a", "8"))
		if ev := next(t, w); ev.Type != watch.Modified {
			t.Fatalf("resumed watch delivered %s", ev.Type)
		}
	})

	t.Run("incomplete: ends as without the wrapper", func(t *testing.T) {
		s := &scriptedLW{}
		l := &resilientLW{inner: s, gate: &apiGate{}, example: &corev1.ConfigMap{}}
		w, err := l.WatchWithContext(context.Background(), streaming)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		_, ws := s.state()
		ws[0].Add(cm("a", "5"))
		next(t, w)
		ws[0].Stop()
		select {
		case _, ok := <-w.ResultChan():
			if ok {
				t.Fatal("an event after the stream ended")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the watch did not end")
		}
		if calls, _ := s.state(); len(calls) != 1 {
			t.Fatalf("%d watch calls: a stream that ended in its initial events was resumed", len(calls))
		}
	})
}

func ptrTo[T any](v T) *T { return &v }
