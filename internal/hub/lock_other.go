//go:build !unix

package hub

import "context"

// lockBlob is a no-op where flock is missing: downloads are still
// serialized within the process, and a partial file mixed by two processes
// fails its checksum instead of being used.
func lockBlob(ctx context.Context, path string) (unlock func(), err error) {
	return func() {}, ctx.Err()
}
