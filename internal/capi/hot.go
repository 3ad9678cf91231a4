package capi

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The calls made for every token (a row's logits, a sampler's apply,
// accept and sample, the end-of-generation check) go through
// purego.SyscallN rather than the functions purego.RegisterLibFunc builds:
// those pass arguments and results through reflect and allocate on every
// call, SyscallN allocates nothing. Only a call whose arguments are
// integers or pointers and whose result fits a register can go this way.
// The function variables keep their types, so callers do not change.
//
// SyscallN's variadic arguments escape (it is go:uintptrescapes), so a
// call with a literal list allocates that list: call2 and call3 pass a
// pooled one instead. The callers keep the Go memory they pass alive (a
// pointer in a pooled list does not).

// bindHot replaces the registered forms of the per-token calls; sym
// resolves a symbol of libllama (all were checked to exist).
func bindHot(sym func(name string) uintptr) {
	logitsIth := sym("llama_get_logits_ith")
	GetLogitsIth = func(c Context, i int32) unsafe.Pointer {
		return pointer(call2(logitsIth, uintptr(c), uintptr(i)))
	}
	apply := sym("llama_sampler_apply")
	SamplerApply = func(s Sampler, cur *TokenDataArray) {
		call2(apply, uintptr(s), uintptr(unsafe.Pointer(cur)))
		runtime.KeepAlive(cur)
	}
	accept := sym("llama_sampler_accept")
	SamplerAccept = func(s Sampler, t Token) {
		call2(accept, uintptr(s), uintptr(t))
	}
	sample := sym("llama_sampler_sample")
	SamplerSample = func(s Sampler, c Context, idx int32) Token {
		return Token(call3(sample, uintptr(s), uintptr(c), uintptr(idx)))
	}
	isEOG := sym("llama_vocab_is_eog")
	VocabIsEOG = func(v Vocab, t Token) bool {
		return call2(isEOG, uintptr(v), uintptr(t))&0xff != 0 // a C bool is the low byte
	}
}

// args2 and args3 hold the argument lists of call2 and call3.
var (
	args2 = sync.Pool{New: func() any { return new([2]uintptr) }}
	args3 = sync.Pool{New: func() any { return new([3]uintptr) }}
)

// call2 calls the C function fn with two integer or pointer arguments and
// returns its integer result.
func call2(fn, a, b uintptr) uintptr {
	args := args2.Get().(*[2]uintptr)
	args[0], args[1] = a, b
	r, _, _ := purego.SyscallN(fn, args[:]...)
	args2.Put(args)
	return r
}

// call3 is call2 with three arguments.
func call3(fn, a, b, c uintptr) uintptr {
	args := args3.Get().(*[3]uintptr)
	args[0], args[1], args[2] = a, b, c
	r, _, _ := purego.SyscallN(fn, args[:]...)
	args3.Put(args)
	return r
}

// pointer turns a C function's pointer result into an unsafe.Pointer. The
// memory is C's, which the Go collector neither moves nor frees.
func pointer(r uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&r))
}
