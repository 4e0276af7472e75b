package t

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// fromEnvelope decodes one --json answer (README, "--json"): an object
// whose "ok" says whether the command succeeded; v receives the object
// itself or, when v points to a slice, its "items" list.
func fromEnvelope(out []byte, v any) error {
	var env struct {
		OK    *bool            `json:"ok"`
		Items *json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(out, &env); err != nil {
		return err
	}
	if env.OK == nil {
		return fmt.Errorf("no \"ok\" in the answer: %.200s", out)
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.Elem().Kind() == reflect.Slice {
		if env.Items == nil {
			return fmt.Errorf("a list answer without \"items\": %.200s", out)
		}
		return json.Unmarshal(*env.Items, v)
	}
	return json.Unmarshal(out, v)
}
