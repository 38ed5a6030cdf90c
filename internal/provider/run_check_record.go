// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/bundle"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
)

// Records of plan-time checks. Terraform plans each changed resource twice
// for one apply: in the plan (terraform plan, or the first walk of
// terraform apply) and again right before applying it, and the second plan
// must give every value the first one knew. A check's result is not
// reproducible from the configuration (the hosts decide it), so the plan
// that runs a check keeps its result in a ConfigMap of the catalog
// namespace, signed with the catalog key, named by an HMAC (with the same
// key) of the run's whole configuration, write-only values included, and
// its project's hash. The apply's plan finds it there and gives the same
// value without a second check, also when a saved plan is applied by
// another machine; the run's create deletes it. A record lives
// checkRecordTTL at most, and expired records are deleted by the next
// check that writes one.
const (
	checkRecordPrefix = "kubeplay-check-"
	checkRecordTTL    = 24 * time.Hour
	domainCheckKey    = "kubeplay-plan-check-key"
)

// checkKey names the record of a check of config (the run's, with its
// write-only values) and plan's project content.
func (r *runResource) checkKey(ctx context.Context, config tfsdk.Config, plan runModel) (string, error) {
	key, err := r.data.signingKey(ctx)
	if err != nil {
		return "", err
	}
	c, err := canonical(config.Raw)
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	sig := key.Sign(domainCheckKey, raw, []byte(plan.ProjectHash.ValueString()))
	h := sig[strings.LastIndexByte(sig, ':')+1:]
	return checkRecordPrefix + h[:40], nil
}

// canonical is v as plain Go values that encoding/json writes the same way
// whatever the order Terraform sent maps and sets in.
func canonical(v tftypes.Value) (any, error) {
	if !v.IsKnown() {
		return nil, fmt.Errorf("the configuration is not fully known")
	}
	if v.IsNull() {
		return nil, nil
	}
	t := v.Type()
	switch {
	case t.Is(tftypes.String):
		var s string
		err := v.As(&s)
		return s, err
	case t.Is(tftypes.Number):
		var f big.Float
		err := v.As(&f)
		return "n:" + f.Text('g', -1), err
	case t.Is(tftypes.Bool):
		var b bool
		err := v.As(&b)
		return b, err
	case t.Is(tftypes.Object{}), t.Is(tftypes.Map{}):
		var m map[string]tftypes.Value
		if err := v.As(&m); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			c, err := canonical(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case t.Is(tftypes.List{}), t.Is(tftypes.Tuple{}), t.Is(tftypes.Set{}):
		var l []tftypes.Value
		if err := v.As(&l); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(l))
		for _, e := range l {
			c, err := canonical(e)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		if t.Is(tftypes.Set{}) {
			slices.SortFunc(out, func(a, b any) int {
				x, _ := json.Marshal(a)
				y, _ := json.Marshal(b)
				return strings.Compare(string(x), string(y))
			})
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected type %s in the configuration", t)
}

// loadCheck reads the record name: false when there is none, it expired,
// or its signature does not verify.
func (r *runResource) loadCheck(ctx context.Context, name string) (checkResult, bool) {
	s, err := r.data.catalog()
	if err != nil {
		return checkResult{}, false
	}
	doc, err := s.GetCheckRecord(ctx, name)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return checkResult{}, false
	case errors.Is(err, catalog.ErrTampered):
		tflog.Warn(ctx, "a plan-time check's record is not signed by the catalog key: ignored", map[string]any{"record": name})
		return checkResult{}, false
	case err != nil:
		tflog.Warn(ctx, "reading a plan-time check's record failed", map[string]any{"record": name, "error": err.Error()})
		return checkResult{}, false
	}
	var res checkResult
	if err := json.Unmarshal(doc, &res); err != nil {
		return checkResult{}, false
	}
	if res.Tasks == nil {
		res.Tasks = []bundle.Change{}
	}
	return res, true
}

// storeCheck writes the record name of res, replacing an older one, and
// deletes expired records; a failure is a warning, since the apply then
// checks again.
func (r *runResource) storeCheck(ctx context.Context, name string, res checkResult, diags *diag.Diagnostics) {
	err := r.writeCheck(ctx, name, res)
	if err != nil {
		diags.AddWarning("Playbook Check Not Kept", fmt.Sprintf("Keeping the plan-time check's result for the "+
			"apply in ConfigMap %s of namespace %s failed: %v. The apply's plan checks again, and fails with "+
			"\"Provider produced inconsistent final plan\" if the hosts changed since. The provider's credential "+
			"needs to create, update, list and delete ConfigMaps in the catalog namespace.", name, r.data.catalogNamespace, err))
	}
}

func (r *runResource) writeCheck(ctx context.Context, name string, res checkResult) error {
	s, err := r.data.catalog()
	if err != nil {
		return err
	}
	doc, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return s.PutCheckRecord(ctx, name, doc, checkRecordTTL)
}

// deleteCheck deletes the record of the check the applied create used.
func (r *runResource) deleteCheck(ctx context.Context, config tfsdk.Config, plan runModel) {
	if r.data == nil || plan.PlannedChanges.IsNull() {
		return
	}
	name, err := r.checkKey(ctx, config, plan)
	if err != nil {
		return
	}
	s, err := r.data.catalog()
	if err == nil {
		err = s.DeleteCheckRecord(ctx, name)
	}
	if err != nil {
		tflog.Warn(ctx, "deleting a plan-time check's record failed; it expires by itself", map[string]any{"record": name, "error": err.Error()})
	}
}
