package cudafatbin

// NPMFacts are npmFacts, for the cudalib suite, which is an external test
// package because it imports package lib (which imports this one).
var NPMFacts = npmFacts
