//go:build !unix

package webui

// openNonblocking is not needed where there are no FIFOs to open.
const openNonblocking = 0
