package api

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// VCPU is a number of vCPUs. Seed 000 writes it as a decimal string ("cpu": "2.0") and so does
// seed 002 ("cpu": "0.5"): a request may give a string or a number, and an answer always gives
// the string, with at least one decimal ("2.0", "0.5", "1.25").
type VCPU float64

// String is the decimal form the API answers with.
func (v VCPU) String() string {
	s := strconv.FormatFloat(float64(v), 'f', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") { // not Inf or NaN, which no valid spec holds
		s += ".0"
	}
	return s
}

// MarshalJSON answers the decimal string.
func (v VCPU) MarshalJSON() ([]byte, error) { return json.Marshal(v.String()) }

// UnmarshalJSON accepts a JSON number or a string holding a plain decimal number ("2", "2.0",
// "0.5"); anything else is a *json.UnmarshalTypeError, which the decoder places at its field.
func (v *VCPU) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		*v = VCPU(f)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil || !plainDecimal(s) {
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[VCPU]()}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[VCPU]()}
	}
	*v = VCPU(f)
	return nil
}

// plainDecimal reports whether s is digits with at most one '.' between digits: "2", "2.0",
// "0.5" (no sign, exponent, hex, Inf or NaN, which strconv would take).
func plainDecimal(s string) bool {
	whole, frac, dot := strings.Cut(s, ".")
	digits := func(p string) bool {
		return p != "" && strings.Trim(p, "0123456789") == ""
	}
	return digits(whole) && (!dot || digits(frac))
}
