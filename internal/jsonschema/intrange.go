package jsonschema

import (
	"math"
	"strconv"
	"strings"
)

// buildMinMaxInt writes an expression matching the decimal integers in
// [minV, maxV] (math.MinInt64 / math.MaxInt64 meaning unbounded), a port of
// llama.cpp's build_min_max_int.
func buildMinMaxInt(minV, maxV int64, out *strings.Builder, decimalsLeft int, topLevel bool) {
	hasMin := minV != math.MinInt64
	hasMax := maxV != math.MaxInt64

	digitRange := func(from, to byte) {
		out.WriteByte('[')
		if from == to {
			out.WriteByte(from)
		} else {
			out.WriteByte(from)
			out.WriteByte('-')
			out.WriteByte(to)
		}
		out.WriteByte(']')
	}
	moreDigits := func(minDigits, maxDigits int) {
		out.WriteString("[0-9]")
		if minDigits == maxDigits && minDigits == 1 {
			return
		}
		out.WriteString("{")
		out.WriteString(strconv.Itoa(minDigits))
		if maxDigits != minDigits {
			out.WriteString(",")
			if maxDigits != math.MaxInt {
				out.WriteString(strconv.Itoa(maxDigits))
			}
		}
		out.WriteString("}")
	}
	var uniformRange func(from, to string)
	uniformRange = func(from, to string) {
		i := 0
		for i < len(from) && i < len(to) && from[i] == to[i] {
			i++
		}
		if i > 0 {
			out.WriteString(`"` + from[:i] + `"`)
		}
		if i < len(from) && i < len(to) {
			if i > 0 {
				out.WriteString(" ")
			}
			subLen := len(from) - i - 1
			if subLen > 0 {
				fromSub := from[i+1:]
				toSub := to[i+1:]
				subZeros := strings.Repeat("0", subLen)
				subNines := strings.Repeat("9", subLen)
				toReached := false
				out.WriteString("(")
				if fromSub == subZeros {
					digitRange(from[i], to[i]-1)
					out.WriteString(" ")
					moreDigits(subLen, subLen)
				} else {
					out.WriteString("[" + string(from[i]) + "] ")
					out.WriteString("(")
					uniformRange(fromSub, subNines)
					out.WriteString(")")
					if from[i] < to[i]-1 {
						out.WriteString(" | ")
						if toSub == subNines {
							digitRange(from[i]+1, to[i])
							toReached = true
						} else {
							digitRange(from[i]+1, to[i]-1)
						}
						out.WriteString(" ")
						moreDigits(subLen, subLen)
					}
				}
				if !toReached {
					out.WriteString(" | ")
					digitRange(to[i], to[i])
					out.WriteString(" ")
					uniformRange(subZeros, toSub)
				}
				out.WriteString(")")
			} else {
				out.WriteString("[" + string(from[i]) + "-" + string(to[i]) + "]")
			}
		}
	}

	if hasMin && hasMax {
		if minV < 0 && maxV < 0 {
			out.WriteString(`"-" (`)
			buildMinMaxInt(-maxV, -minV, out, decimalsLeft, true)
			out.WriteString(")")
			return
		}
		if minV < 0 {
			out.WriteString(`"-" (`)
			buildMinMaxInt(0, -minV, out, decimalsLeft, true)
			out.WriteString(") | ")
			minV = 0
		}
		minS := strconv.FormatInt(minV, 10)
		maxS := strconv.FormatInt(maxV, 10)
		for digits := len(minS); digits < len(maxS); digits++ {
			uniformRange(minS, strings.Repeat("9", digits))
			minS = "1" + strings.Repeat("0", digits)
			out.WriteString(" | ")
		}
		uniformRange(minS, maxS)
		return
	}

	lessDecimals := decimalsLeft - 1
	if lessDecimals < 1 {
		lessDecimals = 1
	}

	if hasMin {
		switch {
		case minV < 0:
			out.WriteString(`"-" (`)
			buildMinMaxInt(math.MinInt64, -minV, out, decimalsLeft, false)
			out.WriteString(") | [0] | [1-9] ")
			moreDigits(0, decimalsLeft-1)
		case minV == 0:
			if topLevel {
				out.WriteString("[0] | [1-9] ")
				moreDigits(0, lessDecimals)
			} else {
				moreDigits(1, decimalsLeft)
			}
		case minV <= 9:
			ch := byte('0' + minV)
			rangeStart := byte('0')
			if topLevel {
				rangeStart = '1'
			}
			if ch > rangeStart {
				digitRange(rangeStart, ch-1)
				out.WriteString(" ")
				moreDigits(1, lessDecimals)
				out.WriteString(" | ")
			}
			digitRange(ch, '9')
			out.WriteString(" ")
			moreDigits(0, lessDecimals)
		default:
			minS := strconv.FormatInt(minV, 10)
			l := len(minS)
			ch := minS[0]
			if ch > '1' {
				start := byte('0')
				if topLevel {
					start = '1'
				}
				digitRange(start, ch-1)
				out.WriteString(" ")
				moreDigits(l, lessDecimals)
				out.WriteString(" | ")
			}
			digitRange(ch, ch)
			out.WriteString(" (")
			rest, _ := strconv.ParseInt(minS[1:], 10, 64)
			buildMinMaxInt(rest, math.MaxInt64, out, lessDecimals, false)
			out.WriteString(")")
			if ch < '9' {
				out.WriteString(" | ")
				digitRange(ch+1, '9')
				out.WriteString(" ")
				moreDigits(l-1, lessDecimals)
			}
		}
		return
	}

	// hasMax only
	if maxV >= 0 {
		if topLevel {
			out.WriteString(`"-" [1-9] `)
			moreDigits(0, lessDecimals)
			out.WriteString(" | ")
		}
		buildMinMaxInt(0, maxV, out, decimalsLeft, true)
	} else {
		out.WriteString(`"-" (`)
		buildMinMaxInt(-maxV, math.MaxInt64, out, decimalsLeft, false)
		out.WriteString(")")
	}
}
