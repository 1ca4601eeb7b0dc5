package manager

import "fmt"

// endpointJSON is a synced discovered Endpoint as the API server sends it.
func endpointJSON(i int) []byte {
	host := fmt.Sprintf("h%d.app-%05d.example.com", i%2, i/2)
	return fmt.Appendf(nil, `{"apiVersion":"polycrate.io/v1alpha1","kind":"Endpoint","metadata":{"name":"h%d-app-%05d-abcdef12","namespace":"perf",`+
		`"uid":"0a1b2c3d-0000-4000-8000-%012d","resourceVersion":"%d","generation":1,"creationTimestamp":"2026-12-02T13:00:00Z",`+
		`"labels":{"polycrate.io/discovered":"true","polycrate.io/source-ingress":"app-%05d"},"finalizers":["polycrate.io/endpoint-cleanup"],`+
		`"ownerReferences":[{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","name":"app-%05d","uid":"1a1b2c3d-0000-4000-8000-%012d"}],`+
		// The two entries discovery's apply (the perf harness's Ingresses: the
		// spec's defaults left out but the path) and the sync's status patch
		// leave (read back from envtest): about half of the object's JSON.
		`"managedFields":[{"manager":"polycrate-operator","operation":"Apply","apiVersion":"polycrate.io/v1alpha1","time":"2026-12-02T13:00:00Z",`+
		`"fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:finalizers":{"v:\"polycrate.io/endpoint-cleanup\"":{}},`+
		`"f:labels":{"f:polycrate.io/discovered":{},"f:polycrate.io/source-ingress":{}},"f:ownerReferences":{"k:{\"uid\":\"1a1b2c3d-0000-4000-8000-000000000000\"}":{}}},`+
		`"f:spec":{"f:displayName":{},"f:path":{},"f:remoteAddress":{}}}},`+
		`{"manager":"polycrate-operator","operation":"Update","apiVersion":"polycrate.io/v1alpha1","time":"2026-12-02T13:00:01Z","fieldsType":"FieldsV1",`+
		`"fieldsV1":{"f:status":{".":{},"f:apiID":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},`+
		`"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:configHash":{},"f:lastSyncedAt":{},"f:observedGeneration":{},"f:phase":{}}},"subresource":"status"}]},`+
		`"spec":{"displayName":%q,"remoteAddress":%q,"remotePort":443,"kind":"http","tls":true,"path":"/health","timeout":5,"interval":60,"expectedStatusCodes":[200]},`+
		`"status":{"phase":"Synced","apiID":"00000000-0000-4000-8000-%012d","configHash":"%016x","lastSyncedAt":"2026-12-02T13:00:01Z","observedGeneration":1,`+
		`"conditions":[{"type":"Ready","status":"True","reason":"Synced","message":"synced to the Polycrate API as 00000000-0000-4000-8000-%012d",`+
		`"lastTransitionTime":"2026-12-02T13:00:01Z","observedGeneration":1}]}}`,
		i%2, i/2, i, 1000+i, i/2, i/2, i/2, host, host, i, i, i)
}
