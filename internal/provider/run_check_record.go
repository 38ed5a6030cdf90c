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
	"github.com/hashicorp/terraform-plugin-framework/path"
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
// namespace, sealed with a key derived from the catalog key, named by an HMAC (with the same
// key) of the run's whole configuration, write-only values included, and
// its project's hash. The apply's plan finds it there and gives the same
// value without a second check, also when a saved plan is applied by
// another machine; the run's create deletes it. A record lives
// checkRecordTTL at most; the catalog's index of records sweeps them, and
// tells the apply of a saved plan whose record is gone to plan again.
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
	parts := [][]byte{raw, []byte(plan.ProjectHash.ValueString())}
	if plan.rerunList != nil {
		parts = append(parts, []byte(hostsSHA256(plan.rerunList))) // the hosts a re-run targets change what the check sees
	}
	sig := key.Sign(domainCheckKey, parts...)
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

// loadCheck reads the record name and when its check ran; the error says
// why there is none (catalog.ErrNotFound, a *catalog.CheckRecordGoneError
// when it expired, catalog.ErrTampered when it does not open with the
// catalog key).
func (r *runResource) loadCheck(ctx context.Context, name string) (checkResult, time.Time, error) {
	s, err := r.data.catalog()
	if err != nil {
		return checkResult{}, time.Time{}, err
	}
	rec, err := s.GetCheckRecord(ctx, name)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return checkResult{}, time.Time{}, err
	case errors.Is(err, catalog.ErrTampered):
		tflog.Warn(ctx, "a plan-time check's record does not open with the catalog key: ignored", map[string]any{"record": name})
		return checkResult{}, time.Time{}, err
	case err != nil:
		tflog.Warn(ctx, "reading a plan-time check's record failed", map[string]any{"record": name, "error": err.Error()})
		return checkResult{}, time.Time{}, err
	}
	var res checkResult
	if err := json.Unmarshal(rec.Doc, &res); err != nil {
		return checkResult{}, time.Time{}, fmt.Errorf("%w: %v", catalog.ErrTampered, err)
	}
	if res.Tasks == nil {
		res.Tasks = []bundle.Change{}
	}
	return res, rec.Written, nil
}

// staleCheckAge: a reused check older than this is a warning.
const staleCheckAge = 15 * time.Minute

// reusedCheck logs the age of the check that the plan reuses from record
// name, and warns when it applies a saved plan (savedPlan) or the check is
// older than staleCheckAge: the hosts may have changed since.
func reusedCheck(ctx context.Context, name string, written time.Time, savedPlan bool, diags *diag.Diagnostics) {
	age := time.Since(written)
	tflog.Info(ctx, "plan-time check reused", map[string]any{"record": name, "checked_at": written.UTC().Format(time.RFC3339),
		"age": age.Round(time.Second).String()})
	if !savedPlan && age < staleCheckAge {
		return
	}
	diags.AddAttributeWarning(path.Root("planned_changes"), "Playbook Check From "+ageText(age)+" Ago",
		fmt.Sprintf("planned_changes shows the plan-time check that ran at %s (%s ago), as the plan showed it. "+
			"The hosts may have changed since, and the run applies its playbook to them as they are now. To check "+
			"afresh, plan again (terraform plan -out=tfplan) and apply the new plan.", written.UTC().Format(time.RFC3339), ageText(age)))
}

// ageText is a duration such as "2h5m" or "40s".
func ageText(d time.Duration) string {
	if d < time.Minute {
		return max(d, 0).Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// checkGone is why the record name that this apply's plan needs is not
// usable (loadErr, from loadCheck), when the plan is known to have relied
// on it: it was written and then expired, was evicted or deleted, or does
// not open. "" when nothing says a plan checked (its inputs were unknown
// then, or its check did not run): there is nothing to reproduce.
func (r *runResource) checkGone(ctx context.Context, name string, loadErr error) string {
	var gone *catalog.CheckRecordGoneError
	switch {
	case errors.As(loadErr, &gone):
		return gone.Error()
	case errors.Is(loadErr, catalog.ErrTampered):
		return fmt.Sprintf("the check's record %s in namespace %s does not open with the catalog key: it was changed "+
			"outside kubeplay, the catalog key changed since the plan, or another kubeplay version wrote it", name, r.data.catalogNamespace)
	}
	s, err := r.data.catalog()
	if err != nil {
		return ""
	}
	gone, err = s.CheckRecordGone(ctx, name)
	if err != nil {
		tflog.Warn(ctx, "reading the plan-time check index failed", map[string]any{"record": name, "error": err.Error()})
		return ""
	}
	switch {
	case gone == nil:
		return ""
	case gone.Why == catalog.GoneDeleted && loadErr != nil && !errors.Is(loadErr, catalog.ErrNotFound):
		// Listed as live: it may be there, but reading it failed.
		return fmt.Sprintf("reading the check's record %s failed: %v (if the provider's credential lacks get on "+
			"ConfigMaps in the catalog namespace, grant it; if the error was passing, apply the saved plan again)", name, loadErr)
	}
	return gone.Error()
}

// checkGoneError is the error of an apply whose plan showed a check that
// is gone (why, from checkGone).
func (r *runResource) checkGoneError(why string, diags *diag.Diagnostics) {
	diags.AddAttributeError(path.Root("planned_changes"), "Plan-Time Check Record Gone", fmt.Sprintf("The plan "+
		"of this run showed a plan-time check (plan_check), which the apply must show again from the check's record "+
		"in catalog namespace %s, but %s. Records live %d hours at most, and at most %d are kept. Nothing was "+
		"created. Plan again (terraform plan -out=tfplan) and apply the new plan.", r.data.catalogNamespace, why,
		int(checkRecordTTL.Hours()), catalog.MaxCheckRecords))
}

// storeCheck writes the record name of res, replacing an older one, and
// sweeps expired records; a failure is a warning, since the plan is still
// right.
func (r *runResource) storeCheck(ctx context.Context, name string, res checkResult, diags *diag.Diagnostics) {
	err := r.writeCheck(ctx, name, res)
	if errors.Is(err, catalog.ErrIndexReset) {
		tflog.Warn(ctx, "the plan-time check index did not open with the catalog key and was started afresh", map[string]any{"record": name})
		err = nil
	}
	if err != nil {
		diags.AddWarning("Playbook Check Not Kept", fmt.Sprintf("Keeping the plan-time check's result for the "+
			"apply in ConfigMap %s of namespace %s failed: %v. The apply of this plan cannot show the check again "+
			"and fails; plan again once the cause is fixed. The provider's credential needs to get, create, update "+
			"and delete ConfigMaps in the catalog namespace.", name, r.data.catalogNamespace, err))
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

// supersedeCheck tells the index that this plan of the configuration ran no
// check, so that its apply does not take an older check's expired record
// for a saved plan's.
func (r *runResource) supersedeCheck(ctx context.Context, name string) {
	s, err := r.data.catalog()
	if err == nil {
		err = s.SupersedeCheckRecord(ctx, name)
	}
	if err != nil {
		tflog.Warn(ctx, "marking a plan-time check's old record as superseded failed", map[string]any{"record": name, "error": err.Error()})
	}
}
