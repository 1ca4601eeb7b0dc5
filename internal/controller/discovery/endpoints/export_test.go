package endpoints

// SetEndpointName replaces the Endpoint CR naming for a test (two hosts that
// collide); the returned func restores it.
func SetEndpointName(f func(host string) string) (restore func()) {
	prev := endpointNamer.Swap(&f)
	return func() { endpointNamer.Store(prev) }
}
