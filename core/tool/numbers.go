package tool

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"

	"github.com/cortexfs/cortexfs/core/abi"
)

// integerParts splits a JSON number literal into sign, significant digits
// and a power of ten, and reports whether its value is integral: 1, 1.0,
// 1e2 and -0 are, 1.5 and 1e-400 are not. It works on the digits rather
// than on a float, so precision and huge exponents cannot fool it.
func integerParts(n string) (neg bool, digits string, exp int64, integral bool) {
	neg = strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mant, expStr := n, ""
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		mant, expStr = n[:i], n[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits = strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return neg, "0", 0, true // zero, whatever the exponent
	}
	if expStr != "" {
		e, err := strconv.ParseInt(expStr, 10, 64)
		// Clamp so the sums below cannot overflow; such exponents are far
		// outside any range a caller can use.
		const limit = 1 << 40
		switch {
		case err != nil && strings.HasPrefix(expStr, "-"), e < -limit:
			e = -limit
		case err != nil, e > limit:
			e = limit
		}
		exp = e
	}
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	return neg, trimmed, exp, exp >= 0
}

// isIntegral reports whether the number literal n is an integer.
func isIntegral(n json.Number) bool {
	_, _, _, ok := integerParts(string(n))
	return ok
}

// int64Of converts an integral literal; it fails for fractions and for
// values outside int64.
func int64Of(n json.Number) (int64, bool) {
	neg, digits, exp, ok := integerParts(string(n))
	if !ok || int64(len(digits))+exp > 19 {
		return 0, false
	}
	v, ok := new(big.Int).SetString(digits+strings.Repeat("0", int(exp)), 10)
	if !ok {
		return 0, false
	}
	if neg {
		v.Neg(v)
	}
	if !v.IsInt64() {
		return 0, false
	}
	return v.Int64(), true
}

// bigOf parses a number for comparisons (minimum, maximum, enum). 256 bits
// are exact for every integer and short decimal a schema of ours uses;
// exponents beyond big.Float's range are refused rather than guessed.
func bigOf(n json.Number) (*big.Float, bool) {
	f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
	return f, err == nil
}

// jsonInt decodes an integer argument the way the validator judged it, so
// 1.0 and 1e2 are accepted by both or neither.
type jsonInt int64

func (i *jsonInt) UnmarshalJSON(b []byte) error {
	v, ok := int64Of(json.Number(b))
	if !ok {
		return abi.Errorf(abi.EINVAL, "number %s is not an integer in range", truncate(string(b), 40))
	}
	*i = jsonInt(v)
	return nil
}
