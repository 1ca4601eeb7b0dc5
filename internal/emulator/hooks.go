package emulator

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/polycrate/polycrate-operator/internal/webhooks/dnsname"
)

// beforeCreate fills server-set fields of a new object; an error refuses it.
func (s *Server) beforeCreate(res *Resource, o *Object, p principal) *hookError {
	switch res.Name {
	case "s3/buckets":
		return s.provisionBucket(o)
	case "domains/dnsrecords":
		// The zone's default_ttl applies to a record created without one.
		if ttl, ok := o.Data["ttl"].(float64); !ok || ttl <= 0 {
			o.Data["ttl"] = float64(3600)
			if z, found := s.store.Get("domains/dnszones", scalarString(o.Data["dns_zone_id"])); found {
				if d, ok := z.Data["default_ttl"].(float64); ok && d > 0 {
					o.Data["ttl"] = d
				}
			}
		}
	case "loadbalancers/instances":
		delete(o.Data, "workspace")
		delete(o.Data, "organization")
		delete(o.Data, "wizard_ports")
		s.newLoadBalancer(o)
	}
	return nil
}

// provisionBucket resolves the region (or the default S3 cluster) and issues the
// bucket's primary credential.
func (s *Server) provisionBucket(o *Object) *hookError {
	var cluster *Object
	var region *Object
	if id, ok := o.Data["region"].(string); ok {
		r, found := s.store.Get("s3/regions", id)
		if !found {
			return &hookError{validation: true, attr: "region", code: "does_not_exist", detail: fmt.Sprintf("Invalid pk \"%s\" - object does not exist.", id)}
		}
		region = r
		cluster, _ = s.store.Get("s3/clusters", r.Data["s3_cluster"].(string))
	} else {
		cfg := s.systemConfigValues()
		id, _ := cfg["default_s3_bucket_cluster"].(string)
		if id == "" {
			return &hookError{validation: true, attr: "region", code: "required", detail: "No region given and no default_s3_bucket_cluster configured in SystemConfig."}
		}
		cluster, _ = s.store.Get("s3/clusters", id)
		for _, r := range s.store.List("s3/regions") {
			if r.Data["s3_cluster"] == id {
				region = r
			}
		}
	}
	if cluster == nil {
		return &hookError{status: http.StatusInternalServerError, typ: "server_error", code: "error", detail: "The region's S3 cluster is missing."}
	}
	if allow, ok := cluster.Data["allow_new_buckets"].(bool); ok && !allow {
		return &hookError{validation: true, attr: "region", code: "invalid", detail: "This S3 cluster does not accept new buckets."}
	}
	delete(o.Data, "workspace")
	delete(o.Data, "organization")
	o.Data["s3_cluster"] = cluster.ID
	o.Data["s3_endpoint"] = "https://" + cluster.Data["endpoint"].(string)
	o.Data["s3_region"] = cluster.Data["region"]
	if region != nil {
		o.Data["region"] = map[string]any{"id": region.ID, "name": region.Data["name"], "display_name": region.Data["display_name"],
			"platform_features": []any{"s3"}, "platform_service": true, "url": "http://emulator/api/v1/regions/" + region.ID + "/"}
	} else {
		delete(o.Data, "region")
	}
	o.Data["current_usage"], o.Data["current_object_count"] = float64(0), float64(0)
	o.Data["_access_key"], o.Data["_secret_key"] = randomKey(10), randomKey(20)
	o.Data["_credential_id"] = seedID("credential", o.ID)
	return nil
}

func randomKey(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}

// decorate adds computed read-only fields to a rendered object.
func (s *Server) decorate(res *Resource, o *Object, out map[string]any) {
	switch res.Name {
	case "endpoints":
		out["agents"] = s.assignedAgents(o)
	case "kubernetes/apps":
		out["desired_version"] = s.desiredVersion(o)
	case "certificates":
		if na, ok := o.Data["not_after"].(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, na); err == nil {
				left := t.Sub(s.cfg.Now())
				days := int(math.Floor(left.Hours() / 24))
				out["days_until_expiry"] = days
				out["is_expired"] = left < 0
				out["is_expiring_soon"] = left >= 0 && left < 30*24*time.Hour
			}
		}
		if _, ok := out["is_expired"]; !ok {
			out["is_expired"], out["is_expiring_soon"] = false, false
		}
	case "domains/dnsrecords":
		if id, ok := o.Data["dns_zone_id"].(string); ok {
			if z, found := s.store.Get("domains/dnszones", id); found {
				out["dns_zone"] = zoneSimple(z)
			}
		}
	case "s3/buckets":
		out["credential"] = map[string]any{"id": o.Data["_credential_id"], "name": "primary", "type": "primary"}
		out["access_keys"] = []any{out["credential"]}
	}
}

func zoneSimple(z *Object) map[string]any {
	return map[string]any{"id": z.ID, "name": z.Data["name"], "kind": z.Data["kind"], "provider": z.Data["provider"],
		"primary_zone": z.Data["primary_zone"], "url": "http://emulator/api/v1/domains/dnszones/" + z.ID + "/"}
}

func (s *Server) bucketCreateResponse(o *Object) map[string]any {
	full := s.render(byName["s3/buckets"], o)
	return pick(full, "id", "name", "region", "organization", "workspace", "labels", "annotations", "user_id", "credential",
		"access_keys", "state", "conditions", "reconciliation_running", "provider_reference", "current_usage",
		"current_object_count", "cors_allow_all")
}

// bucketCredentials serves GET /api/v1/s3/buckets/{id}/credentials/ in the legacy
// envelope (success / data.credentials / meta).
func (s *Server) bucketCredentials(w http.ResponseWriter, r *http.Request, p principal) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/s3/buckets/"), "/credentials/")
	o, ok := s.visible(byName["s3/buckets"], id, p, false)
	if !ok {
		writeError(w, http.StatusNotFound, "client_error", "not_found", "Bucket not found", nil)
		return
	}
	created := o.CreatedAt.Format(time.RFC3339Nano)
	cred := map[string]any{"id": o.Data["_credential_id"], "name": "primary", "description": nil, "api_user": o.Data["_access_key"],
		"created_at": created, "updated_at": o.UpdatedAt.Format(time.RFC3339Nano), "active": true, "metadata": map[string]any{},
		"permissions": "full", "subuser_id": nil, "principal_arn": nil, "type": "primary", "organization": o.Organization,
		"access_key": o.Data["_access_key"], "secret_key": o.Data["_secret_key"]}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": true,
		"data":    map[string]any{"bucket_id": o.ID, "bucket_name": o.Data["name"], "credentials": []any{cred}},
		"meta":    map[string]any{"total_credentials": 1, "primary_credentials": 1, "additional_credentials": 0},
	})
}

// rotateBucketCredentials issues a new primary credential (test control).
func (s *Server) rotateBucketCredentials(id string) bool {
	found := false
	_ = s.store.Update("s3/buckets", func(objs map[string]*Object) ([]*Object, error) {
		o := edit(objs, id, func(o *Object) {
			o.Data["_access_key"], o.Data["_secret_key"] = randomKey(10), randomKey(20)
			o.UpdatedAt = s.cfg.Now().UTC()
		})
		if o == nil {
			return nil, nil
		}
		found = true
		return []*Object{o}, nil
	})
	return found
}

// zoneFor is the zone a name belongs to, among those visible, by the API's
// rule (dnsname.Best): the longest matching internal zone, else the longest
// external zone with primary_zone=true.
func (s *Server) zoneFor(fqdn string, visible func(*Object) bool) *Object {
	var live []*Object
	for _, z := range s.store.List("domains/dnszones") {
		if z.DeletedAt == nil && visible(z) {
			live = append(live, z)
		}
	}
	best, _ := dnsname.Best(fqdn, live, func(z *Object) dnsname.Zone {
		return dnsname.Zone{Name: scalarString(z.Data["name"]), Internal: z.Data["kind"] == "internal", Primary: z.Data["primary_zone"] == true}
	})
	return best
}

// resolveZone serves GET /api/v1/domains/dnszones/resolve/?fqdn=: the longest
// matching internal zone of the caller's organization, else the longest external
// zone with primary_zone=true.
func (s *Server) resolveZone(w http.ResponseWriter, r *http.Request, p principal) {
	fqdn := dnsname.Canonical(r.URL.Query().Get("fqdn"))
	if fqdn == "" {
		writeValidation(w, []FieldError{{"fqdn", "required", "This field is required."}})
		return
	}
	res := byName["domains/dnszones"]
	best := s.zoneFor(fqdn, func(z *Object) bool { return p.sees(res, z) })
	if best == nil {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, zoneSimple(best))
}

// systemConfigKeys are the keys of /api/v1/system/config/: the 23 the published
// schema types, plus the two rollout keys of seed 000 (Extension).
var systemConfigKeys = map[string]Kind{
	"system_owner_organization": String, "system_host_cluster": String, "system_apm_cluster": String,
	"default_support_product": String, "default_s3_product": String, "default_assistant_product": String,
	"default_loadbalancer_product": String, "default_k8s_volume_product": String,
	"default_internal_dns_zone_product": String, "default_external_dns_zone_product": String,
	"system_domain_registrar": String, "default_s3_bucket_cluster": String, "system_default_pop": String,
	"k8s_cluster_backup_s3_cluster": String, "default_k8s_cluster_dns_zone": String,
	"SYSTEM_NAME": String, "SYSTEM_FRONTEND_BASE_URL": String, "platform_dns_zone": String,
	"global_debug_mode": Bool, "SYSTEM_RECONCILIATION_INTERVAL_SECONDS": Int, "SYSTEM_DISCOVERY_INTERVAL_SECONDS": Int,
	"DISCOVERY_ENABLED": Bool, "RECONCILIATION_ENABLED": Bool,
	// Extension (seed 000 "SystemConfig-Keys").
	"OPERATOR_BLOCK_VERSION": String, "OPERATOR_ROLLOUT_PERCENTAGE": Int,
}

func defaultSystemConfig() map[string]any {
	m := map[string]any{}
	for k, kind := range systemConfigKeys {
		switch kind {
		case Bool:
			m[k] = false
		case Int:
			m[k] = float64(0)
		default:
			m[k] = ""
		}
	}
	m["SYSTEM_RECONCILIATION_INTERVAL_SECONDS"] = float64(300)
	m["SYSTEM_DISCOVERY_INTERVAL_SECONDS"] = float64(300)
	m["DISCOVERY_ENABLED"], m["RECONCILIATION_ENABLED"] = true, true
	m["OPERATOR_ROLLOUT_PERCENTAGE"] = float64(100)
	return m
}

func (s *Server) systemConfigValues() map[string]any {
	o, ok := s.store.Get(internalResource, systemConfigID)
	if !ok {
		return defaultSystemConfig()
	}
	return o.Data
}

// systemConfig serves GET and PATCH /api/v1/system/config/. Any token may read;
// only system tokens may write. PATCH errors use SystemConfigUpdateErrors.
func (s *Server) systemConfig(w http.ResponseWriter, r *http.Request, p principal) {
	if r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, s.systemConfigValues())
		return
	}
	if !p.system {
		forbidden(w, "You do not have permission to perform this action.")
		return
	}
	body, ok := readBody(w, r, false)
	if !ok {
		return
	}
	errs := map[string]any{}
	for k, v := range body {
		kind, known := systemConfigKeys[k]
		if !known {
			errs[k] = "Unknown configuration key."
			continue
		}
		if fe := validateValue(Field{Kind: kind}, v, k); len(fe) > 0 {
			errs[k] = fe[0].Detail
		}
		if k == "OPERATOR_ROLLOUT_PERCENTAGE" {
			if n, isNum := v.(float64); isNum && (n < 0 || n > 100) {
				errs[k] = "Ensure this value is between 0 and 100."
			}
		}
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "Invalid configuration.", "errors": errs})
		return
	}
	var keys []string
	err := s.store.Update(internalResource, func(objs map[string]*Object) ([]*Object, error) {
		o := edit(objs, systemConfigID, func(o *Object) {
			for k, v := range body {
				o.Data[k] = v
				keys = append(keys, k)
			}
			o.UpdatedAt = s.cfg.Now().UTC()
		})
		return []*Object{o}, nil
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "error", err.Error(), nil)
		return
	}
	sort.Strings(keys)
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "updated_keys": keys})
}
