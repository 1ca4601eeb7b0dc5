// Package opconfig holds the operator's live configuration: an immutable snapshot
// of the OperatorConfig singleton that every controller reads, the namespace filter
// all discovery types share, and change notification.
package liveconfig

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	v1 "github.com/polycrate/polycrate-operator/api/v1alpha1"
)

// NamespaceFilter is the seed's rule (OperatorConfig "Namespace-Filterung"): an empty
// Watch list means every namespace; Ignore is subtracted from Watch, so a namespace
// in both lists is ignored.
type NamespaceFilter struct {
	Watch  []string
	Ignore []string
}

// Allows reports whether a namespace is discovered.
func (f NamespaceFilter) Allows(ns string) bool {
	if slices.Contains(f.Ignore, ns) {
		return false
	}
	return len(f.Watch) == 0 || slices.Contains(f.Watch, ns)
}

// WithIgnored adds namespaces to ignore (e.g. the API cluster record's
// operator_ignore_namespaces), keeping the receiver unchanged.
func (f NamespaceFilter) WithIgnored(ns ...string) NamespaceFilter {
	out := NamespaceFilter{Watch: slices.Clone(f.Watch), Ignore: slices.Clone(f.Ignore)}
	for _, n := range ns {
		if n != "" && !slices.Contains(out.Ignore, n) {
			out.Ignore = append(out.Ignore, n)
		}
	}
	return out
}

// Snapshot is one immutable reading of the OperatorConfig. Never modify it: take
// a new one from Store.
type Snapshot struct {
	// Namespace and Generation identify the OperatorConfig it was read from.
	Namespace  string
	Generation int64
	// Spec is the OperatorConfig's spec (defaults applied by the API server).
	Spec v1.OperatorConfigSpec
	// LocalClusterID is the API id of the local cluster, "" until it is registered.
	LocalClusterID string
	// ClusterIgnoreNamespaces come from the API's cluster record
	// (operator_ignore_namespaces, discovery_ignored_namespaces) and are added to
	// every discovery type's ignore list.
	ClusterIgnoreNamespaces []string
}

// ErrNoLocalCluster is why a sync waits: objects that need k8s_cluster (backups,
// schedules, certificates, volumes) are not sent before the local cluster's API id
// is known.
var ErrNoLocalCluster = errors.New("waiting for the local cluster to be registered with the Polycrate API (OperatorConfig status.local_cluster)")

// ErrLocalClusterDisabled is ErrNoLocalCluster for good: local_cluster.enabled is
// false, so objects that belong to a cluster are not synced at all (a defined
// outcome, not a wait that never ends).
var ErrLocalClusterDisabled = fmt.Errorf("%w: local_cluster.enabled is false, so objects that belong to a cluster "+
	"(K8s apps, hosts, volumes, backups, schedules, certificates) are not synced; set it to true to sync them", ErrNoLocalCluster)

// LocalCluster returns the local cluster's API id, or ErrNoLocalCluster (the sync
// then waits for the registration and makes no API call), or
// ErrLocalClusterDisabled.
func (s *Snapshot) LocalCluster() (string, error) {
	switch {
	case s != nil && !Enabled(s.Spec.LocalCluster.Enabled):
		return "", ErrLocalClusterDisabled
	case s == nil || s.LocalClusterID == "":
		return "", ErrNoLocalCluster
	}
	return s.LocalClusterID, nil
}

// Enabled reads an optional boolean whose default is true.
func Enabled(b *bool) bool { return b == nil || *b }

// EndpointNamespaces is the namespace filter of endpoint discovery.
func (s *Snapshot) EndpointNamespaces() NamespaceFilter {
	d := s.Spec.EndpointDiscovery
	return NamespaceFilter{Watch: d.WatchNamespaces, Ignore: d.IgnoreNamespaces}.WithIgnored(s.ClusterIgnoreNamespaces...)
}

// AppNamespaces is the namespace filter of app discovery.
func (s *Snapshot) AppNamespaces() NamespaceFilter {
	d := s.Spec.AppDiscovery
	return NamespaceFilter{Watch: d.WatchNamespaces, Ignore: d.IgnoreNamespaces}.WithIgnored(s.ClusterIgnoreNamespaces...)
}

// BackupNamespaces is the namespace filter of backup discovery.
func (s *Snapshot) BackupNamespaces() NamespaceFilter {
	d := s.Spec.BackupDiscovery
	return NamespaceFilter{Watch: d.WatchNamespaces, Ignore: d.IgnoreNamespaces}.WithIgnored(s.ClusterIgnoreNamespaces...)
}

// CertificateNamespaces is the namespace filter of certificate discovery.
func (s *Snapshot) CertificateNamespaces() NamespaceFilter {
	d := s.Spec.CertificateDiscovery
	return NamespaceFilter{Watch: d.WatchNamespaces, Ignore: d.IgnoreNamespaces}.WithIgnored(s.ClusterIgnoreNamespaces...)
}

// Store holds the current snapshot (nil while there is no OperatorConfig) and
// tells subscribers when it changes.
type Store struct {
	cur    atomic.Pointer[Snapshot]
	loaded atomic.Bool
	mu     sync.Mutex
	subs   []chan struct{}
	// early: a caller acted on "not loaded yet" (Early).
	early bool
}

// Early reports whether the OperatorConfig has not been read yet, and records
// that a caller is waiting for it: the first load then wakes every object
// (controller.Waker). A load nobody waited for wakes only the objects that are
// not Ready: every other object is reconciled with the configuration anyway. The
// record and the load are ordered by the same lock, so a wait that saw "not
// loaded" is always seen by the load's subscribers.
func (s *Store) Early() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded.Load() {
		return false
	}
	s.early = true
	return true
}

// WaitedBeforeLoad reports whether a caller saw Early return true.
func (s *Store) WaitedBeforeLoad() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.early
}

// Loaded reports whether the OperatorConfig has been read once since start (or
// found absent). Before that a nil snapshot means "not known yet", not "no
// OperatorConfig": controllers wait instead of withdrawing what they made.
func (s *Store) Loaded() bool { return s.loaded.Load() }

// MarkLoaded records that the OperatorConfig was found absent at start, without
// touching the snapshot, and notifies subscribers.
func (s *Store) MarkLoaded() {
	s.mu.Lock()
	first := !s.loaded.Swap(true)
	s.mu.Unlock()
	if first {
		s.notify()
	}
}

// Get returns the current snapshot; nil means no OperatorConfig: discover nothing.
func (s *Store) Get() *Snapshot { return s.cur.Load() }

// Set publishes a snapshot (nil withdraws it) and notifies subscribers.
func (s *Store) Set(snap *Snapshot) {
	s.cur.Store(snap)
	s.mu.Lock()
	s.loaded.Store(true)
	s.mu.Unlock()
	s.notify()
}

// Notify wakes the subscribers without a new snapshot: the API connection the
// snapshot names was (re)configured, and objects waiting for it look again.
func (s *Store) Notify() { s.notify() }

func (s *Store) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.subs {
		select {
		case c <- struct{}{}:
		default: // a notification is already pending
		}
	}
}

// Subscribe returns a channel that receives a value after each change (coalesced:
// one pending notification at most).
func (s *Store) Subscribe() <-chan struct{} {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs = append(s.subs, c)
	s.mu.Unlock()
	return c
}
