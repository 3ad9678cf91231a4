//go:build !unix

package server

// openNonblocking is not needed where there are no FIFOs to open.
const openNonblocking = 0
