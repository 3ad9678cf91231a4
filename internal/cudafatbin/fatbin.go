// Package cudafatbin reads what a CUDA library carries for the GPU: the
// fat binaries of its .nv_fatbin ELF section, each entry either machine
// code (SASS, a cubin) for one architecture or PTX for one virtual
// architecture at one PTX ISA version. Check decides from those facts,
// a device's compute capability and the driver's CUDA version whether the
// device can run the library, without touching the device.
//
// The layout read here is the one nvcc writes and the CUDA driver loads,
// which NVIDIA does not document: a section holds fat binary containers
// one after the other (magic 0xBA55ED50, a 16-byte header, then the
// entries), each entry a header (kind, header size, payload size,
// version fields, architecture, flags, sizes) and its payload. For PTX
// the header's version fields hold the PTX ISA version; the parser reads
// the .version line of an uncompressed PTX text instead, where it can.
// Compressed payloads (LZ4 or zstd, flagged in the entry header) are not
// decompressed: their header is enough.
package cudafatbin

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
)

// Kinds of fat binary entries.
const (
	KindPTX  = 1 // PTX text, compiled by the driver's JIT for the device
	KindSASS = 2 // an ELF cubin: machine code for one architecture
)

// Magic begins each fat binary container.
const Magic = 0xBA55ED50

// Entry flags (the entry header's 64-bit flags field).
const (
	FlagCompressedLZ4  = 0x2000 // the payload is LZ4-compressed
	FlagCompressedZstd = 0x8000 // the payload is zstd-compressed
)

const (
	containerHeaderSize = 16
	entryHeaderMin      = 64   // the fields read below
	entryHeaderMax      = 4096 // larger is taken for damage
	ptxPrefix           = 4096 // the bytes of a PTX text searched for .version
)

// Version is a PTX ISA version, or a CUDA version (13.0).
type Version struct{ Major, Minor int }

// Less orders versions.
func (v Version) Less(w Version) bool {
	return v.Major < w.Major || v.Major == w.Major && v.Minor < w.Minor
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// DriverVersion converts cuDriverGetVersion's number (1000*major +
// 10*minor, 13000 for CUDA 13.0) to a Version.
func DriverVersion(n int) Version { return Version{n / 1000, n % 1000 / 10} }

// Entry is one entry of a fat binary.
type Entry struct {
	Kind int // KindPTX or KindSASS (other kinds are kept but not used)
	// Arch is the architecture as 10*major+minor: 86 for sm_86 (SASS) or
	// compute_86 (PTX).
	Arch int
	// ISA is the PTX ISA version of a PTX entry: its .version line when
	// the text is stored uncompressed, the entry header's otherwise.
	ISA   Version
	Flags uint64
}

// Compressed reports whether the payload is compressed.
func (e Entry) Compressed() bool { return e.Flags&(FlagCompressedLZ4|FlagCompressedZstd) != 0 }

// PTX is one virtual architecture at one PTX ISA version.
type PTX struct {
	Arch int
	ISA  Version
}

// Facts summarise the fat binaries of a library.
type Facts struct {
	Containers int   // the fat binary containers (about one per source file)
	Entries    int   // their entries
	SASS       []int // the architectures with machine code, ascending
	// PTX are the virtual architectures with PTX, each at the newest ISA
	// version any of its entries uses, by ascending architecture.
	PTX []PTX
}

// ErrNoFatbin reports an ELF file without a .nv_fatbin section: a
// library built without CUDA device code, or not by nvcc.
var ErrNoFatbin = errors.New("no .nv_fatbin section")

// ReadFile reads the facts of the ELF shared library at path (such as
// libggml-cuda.so). It reads the entry headers only, not the whole
// section.
func ReadFile(path string) (Facts, error) {
	f, err := os.Open(path)
	if err != nil {
		return Facts{}, err
	}
	defer f.Close()
	off, size, err := section(f)
	if err != nil {
		return Facts{}, err
	}
	return Parse(io.NewSectionReader(f, off, size), size)
}

// section finds the .nv_fatbin section of the ELF file f: its offset in
// the file and its size.
func section(f io.ReaderAt) (off, size int64, err error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return 0, 0, err
	}
	s := ef.Section(".nv_fatbin")
	if s == nil {
		return 0, 0, ErrNoFatbin
	}
	if s.Type == elf.SHT_NOBITS {
		return 0, 0, fmt.Errorf(".nv_fatbin has no data")
	}
	return int64(s.Offset), int64(s.Size), nil
}

// Parse reads the facts of a .nv_fatbin section's contents, size bytes of
// r. Damage is an error, never a panic; zero padding between containers
// is skipped.
func Parse(r io.ReaderAt, size int64) (Facts, error) {
	var f Facts
	sass := map[int]bool{}
	ptx := map[int]Version{}
	n, err := walk(r, size, func(_ int64, ent Entry) {
		f.Entries++
		switch ent.Kind {
		case KindSASS:
			sass[ent.Arch] = true
		case KindPTX:
			if v, ok := ptx[ent.Arch]; !ok || v.Less(ent.ISA) {
				ptx[ent.Arch] = ent.ISA
			}
		}
	})
	if err != nil {
		return Facts{}, err
	}
	f.Containers = n
	for a := range sass {
		f.SASS = append(f.SASS, a)
	}
	slices.Sort(f.SASS)
	for a, v := range ptx {
		f.PTX = append(f.PTX, PTX{a, v})
	}
	slices.SortFunc(f.PTX, func(a, b PTX) int { return a.Arch - b.Arch })
	return f, nil
}

// walk calls visit with each entry of the containers in size bytes of r,
// and the entry header's offset, and returns the number of containers.
func walk(r io.ReaderAt, size int64, visit func(off int64, e Entry)) (int, error) {
	if size < 0 {
		return 0, fmt.Errorf("negative size")
	}
	containers := 0
	var hdr [entryHeaderMin]byte
	for pos := int64(0); pos < size; {
		if size-pos < 4 {
			if err := zeros(r, pos, size-pos); err != nil {
				return 0, err
			}
			break
		}
		if _, err := r.ReadAt(hdr[:4], pos); err != nil {
			return 0, fmt.Errorf("fatbin at %d: %w", pos, err)
		}
		switch binary.LittleEndian.Uint32(hdr[:4]) {
		case 0:
			pos += 4 // padding
			continue
		case Magic:
		default:
			return 0, fmt.Errorf("fatbin at %d: bad magic %#x", pos, binary.LittleEndian.Uint32(hdr[:4]))
		}
		if size-pos < containerHeaderSize {
			return 0, fmt.Errorf("fatbin at %d: truncated header", pos)
		}
		if _, err := r.ReadAt(hdr[:containerHeaderSize], pos); err != nil {
			return 0, fmt.Errorf("fatbin at %d: %w", pos, err)
		}
		hsize := int64(binary.LittleEndian.Uint16(hdr[6:8]))
		body := binary.LittleEndian.Uint64(hdr[8:16])
		if hsize < containerHeaderSize || hsize > size-pos || body > uint64(size-pos-hsize) {
			return 0, fmt.Errorf("fatbin at %d: header size %d and body %d overrun the section (%d bytes)", pos, hsize, body, size)
		}
		containers++
		end := pos + hsize + int64(body)
		for e := pos + hsize; e < end; {
			if end-e < entryHeaderMin {
				// The body may end in padding.
				if err := zeros(r, e, end-e); err != nil {
					return 0, fmt.Errorf("fatbin entry at %d: truncated header", e)
				}
				break
			}
			if _, err := r.ReadAt(hdr[:], e); err != nil {
				return 0, fmt.Errorf("fatbin entry at %d: %w", e, err)
			}
			ent, ehsize, payload, err := entryHeader(hdr[:])
			if err != nil {
				return 0, fmt.Errorf("fatbin entry at %d: %w", e, err)
			}
			if ent.Kind == 0 && ehsize == 0 {
				// Zero padding to the end of the body.
				if err := zeros(r, e, end-e); err != nil {
					return 0, fmt.Errorf("fatbin entry at %d: kind 0", e)
				}
				break
			}
			if ehsize > end-e || payload > uint64(end-e-ehsize) {
				return 0, fmt.Errorf("fatbin entry at %d: header size %d and payload %d overrun the container", e, ehsize, payload)
			}
			if ent.Kind == KindPTX && !ent.Compressed() {
				n := min(int64(payload), ptxPrefix)
				text := make([]byte, n)
				if _, err := r.ReadAt(text, e+ehsize); err != nil {
					return 0, fmt.Errorf("fatbin entry at %d: %w", e, err)
				}
				if v, ok := PTXVersion(text); ok {
					ent.ISA = v
				}
			}
			visit(e, ent)
			e += ehsize + int64(payload)
		}
		pos = end
	}
	return containers, nil
}

// Retarget rewrites, in the ELF library at path, the architecture of
// every SASS entry for from to to, and returns how many it rewrote. Only
// the entry headers change, not the machine code: a GPU of architecture
// from is then offered no machine code it can run, as with a build made
// for another GPU, while the library still loads. It exists to check on
// a GPU machine that such a build is refused rather than run
// (.ci/gpu-run); it is no way to port code between architectures.
func Retarget(path string, from, to int) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	secOff, size, err := section(f)
	if err != nil {
		return 0, err
	}
	var at []int64
	if _, err := walk(io.NewSectionReader(f, secOff, size), size, func(off int64, e Entry) {
		if e.Kind == KindSASS && e.Arch == from {
			at = append(at, off)
		}
	}); err != nil {
		return 0, err
	}
	if len(at) == 0 {
		return 0, fmt.Errorf("%s has no machine code for sm_%d", path, from)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(to))
	for _, off := range at {
		if _, err := w.WriteAt(b[:], secOff+off+28); err != nil {
			return 0, err
		}
	}
	return len(at), w.Close()
}

// entryHeader decodes an entry header (at least entryHeaderMin bytes):
//
//	0  u16 kind         2  u16 format version   4  u32 header size
//	8  u64 payload size 16 u32 compressed size  20 u32 (address size)
//	24 u16 minor        26 u16 major            28 u32 arch
//	40 u64 flags        56 u64 uncompressed size
func entryHeader(h []byte) (e Entry, hsize int64, payload uint64, err error) {
	le := binary.LittleEndian
	e.Kind = int(le.Uint16(h[0:2]))
	hsize = int64(le.Uint32(h[4:8]))
	payload = le.Uint64(h[8:16])
	if e.Kind == 0 && hsize == 0 {
		return e, 0, 0, nil
	}
	if hsize < entryHeaderMin || hsize > entryHeaderMax {
		return e, 0, 0, fmt.Errorf("header size %d", hsize)
	}
	e.ISA = Version{int(le.Uint16(h[26:28])), int(le.Uint16(h[24:26]))}
	if e.Kind != KindPTX {
		e.ISA = Version{}
	}
	e.Arch = int(le.Uint32(h[28:32]))
	e.Flags = le.Uint64(h[40:48])
	return e, hsize, payload, nil
}

// zeros checks that n bytes at off are zero (padding).
func zeros(r io.ReaderAt, off, n int64) error {
	var buf [256]byte
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := r.ReadAt(buf[:k], off); err != nil {
			return err
		}
		if bytes.ContainsFunc(buf[:k], func(r rune) bool { return r != 0 }) {
			return fmt.Errorf("fatbin at %d: trailing bytes", off)
		}
		off += k
		n -= k
	}
	return nil
}

// PTXVersion reads the ".version X.Y" directive of a PTX text (its first
// directive, after comments and blank lines).
func PTXVersion(text []byte) (Version, bool) {
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		line = bytes.TrimSpace(bytes.TrimRight(line, "\x00"))
		if len(line) == 0 || bytes.HasPrefix(line, []byte("//")) {
			continue
		}
		rest, ok := bytes.CutPrefix(line, []byte(".version"))
		if !ok {
			return Version{}, false
		}
		maj, min, ok := bytes.Cut(bytes.TrimSpace(rest), []byte("."))
		if !ok {
			return Version{}, false
		}
		a, err1 := strconv.Atoi(string(maj))
		b, err2 := strconv.Atoi(string(min))
		if err1 != nil || err2 != nil || a < 0 || b < 0 || a > 99 || b > 99 {
			return Version{}, false
		}
		return Version{a, b}, true
	}
	return Version{}, false
}
