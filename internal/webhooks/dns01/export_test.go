package dns01

// StartAPI is startAPI for the package's external tests.
var StartAPI = startAPI
