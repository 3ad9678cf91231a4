//go:build !unix

package engine

// openNoFollow are the open flags of slot files; this system has no
// O_NOFOLLOW, so symbolic links are refused by the regular-file check of
// openSlotFile only when they point at something else than a file.
const openNoFollow = 0
