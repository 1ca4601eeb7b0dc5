#!/usr/bin/env bash
# make race, internal/cloud: the suite runs k8s.io/cloud-provider's service
# controller, which sets a cached Service's pointer outside its cache's lock
# while the node sync reads the cache (controllers/service/controller.go,
# processServiceCreateOrUpdate and serviceCache.allServices). That race is
# upstream and benign (one word, and the node sync skips a nil Service); see
# docs/development.md. The suite passes when every race it reports is that one
# and nothing else failed.
set -u
unset GORACE # every report, and the suite to its end
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -race -count=1 -timeout 20m ./internal/cloud >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" -eq 0 ] && exit 0
races=$(grep -c 'WARNING: DATA RACE' "$out")
known=$(grep -c -F 'serviceCache).allServices' "$out")
fails=$(grep -c -E '^[[:space:]]*--- FAIL' "$out")
racefails=$(grep -c 'race detected during execution of test' "$out")
specfails=$(grep -c -F '[FAIL]' "$out")
if [ "$races" -gt 0 ] && [ "$races" -eq "$known" ] && [ "$fails" -eq "$racefails" ] && [ "$specfails" -eq 0 ]; then
	echo "make race: internal/cloud reported only k8s.io/cloud-provider's known race (${races}×); every spec passed"
	exit 0
fi
exit 1
