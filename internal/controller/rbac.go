package controller

// RBAC the operator's manager needs, generated into config/rbac/role.yaml by
// `make manifests`. Each later controller adds the markers for what it reads and
// writes, next to its code; this file holds what the manager as a whole needs.
//
// The operator's own kinds: it writes the discovered ones, their status, and the
// finalizers it sets.
// +kubebuilder:rbac:groups=polycrate.io,resources=operatorconfigs;k8sclusters;endpoints;hosts;k8sapps;k8svolumes;backups;backupschedules;certificates;s3buckets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=polycrate.io,resources=operatorconfigs/status;k8sclusters/status;endpoints/status;hosts/status;k8sapps/status;k8svolumes/status;backups/status;backupschedules/status;certificates/status;s3buckets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=polycrate.io,resources=operatorconfigs/finalizers;k8sclusters/finalizers;endpoints/finalizers;hosts/finalizers;k8sapps/finalizers;k8svolumes/finalizers;backups/finalizers;backupschedules/finalizers;certificates/finalizers;s3buckets/finalizers,verbs=update
//
// Events explain what the operator did and why something failed.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// CRDs are read to learn which third-party kinds (Gateway API, cert-manager,
// Velero, CloudNativePG) exist, so their controllers start when they appear; and
// the operator applies its own CRDs on start (run --install-crds, the default):
// create and patch, by name of its own ten CRDs only (a server-side apply names
// the object, so the API server checks even its create against resourceNames;
// internal/crds tests that the list matches the embedded CRDs). It never deletes
// a CRD. With --install-crds=false the write rule can be dropped.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=create;patch,resourceNames=backups.polycrate.io;backupschedules.polycrate.io;certificates.polycrate.io;endpoints.polycrate.io;hosts.polycrate.io;k8sapps.polycrate.io;k8sclusters.polycrate.io;k8svolumes.polycrate.io;operatorconfigs.polycrate.io;s3buckets.polycrate.io
