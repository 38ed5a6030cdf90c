// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalog"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/catalogkey"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runengine"
	"github.com/kubeplay/terraform-provider-kubeplay/internal/runner"
)

// Re-running only the hosts that failed. A run that opts in
// (rerun_failed_hosts) and ends with hosts that failed or were unreachable
// keeps their names, all of them, in a sealed record of the catalog
// namespace named by an HMAC of the run's name; its next run of that name
// (a replacement) targets only them. Not in the state: a list of 10,000
// hosts would grow every plan and refresh by hundreds of kilobytes, and a
// replacement's create sees neither the old run's state nor its private
// state (Terraform plans it from a null prior state, and at apply after
// the old run's destroy). The name keys it because it is what stays the
// same across a replacement: the plan shows the list's run, count and
// digest (rerun_hosts), and apply refuses a list that is not the planned one.
const (
	rerunRecordPrefix = "kubeplay-rerun-"
	rerunRecordTTL    = 30 * 24 * time.Hour
	domainRerunKey    = "kubeplay-rerun-key"
	// maxRerunRecord bounds a record's compressed list: a ConfigMap holds
	// 1 MiB, of which sealing in base64 takes a third.
	maxRerunRecord = 700 << 10
)

var rerunHostsType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"run_id": types.StringType, "count": types.Int64Type, "sha256": types.StringType,
}}

func rerunAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"rerun_failed_hosts": schema.BoolAttribute{
			MarkdownDescription: "Whether the next run of this `name` targets only the hosts that failed in this one ([Sliced " +
				"Runs](#sliced-runs)). Defaults to `false`.",
			Optional: true, Computed: true, Default: booldefault.StaticBool(false),
		},
		"rerun_hosts": schema.SingleNestedAttribute{
			MarkdownDescription: "With `rerun_failed_hosts`, the hosts this run targets; null when it targets every host.",
			Computed:            true,
			Attributes: map[string]schema.Attribute{
				"run_id": schema.StringAttribute{MarkdownDescription: "The run whose failed and unreachable hosts these are.", Computed: true},
				"count":  schema.Int64Attribute{MarkdownDescription: "How many hosts the run targets.", Computed: true},
				"sha256": schema.StringAttribute{MarkdownDescription: "The SHA-256 of the hosts' names, sorted, one per line.", Computed: true},
			},
		},
	}
}

// rerunDoc is a rerun record's content.
type rerunDoc struct {
	RunID string   `json:"run_id"`
	Hosts []string `json:"hosts"`
}

// hostsSHA256 is the digest rerun_hosts shows of hosts (sorted).
func hostsSHA256(hosts []string) string {
	h := sha256.New()
	for _, n := range hosts {
		_, _ = io.WriteString(h, n+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// rerunName names the record of runs named name.
func (r *runResource) rerunName(ctx context.Context, name string) (string, error) {
	key, err := r.data.signingKey(ctx)
	if err != nil {
		return "", err
	}
	sig := key.Sign(domainRerunKey, []byte(name))
	return rerunRecordPrefix + sig[strings.LastIndexByte(sig, ':')+1:][:40], nil
}

// loadRerun reads the record of runs named name; nil without one. An
// error is worded for a diagnostic: its cause and remedy.
func (r *runResource) loadRerun(ctx context.Context, name string) (*rerunDoc, error) {
	rec, err := r.rerunName(ctx, name)
	if errors.Is(err, catalogkey.ErrMissing) {
		return nil, nil // no key, so no record it sealed: a first run in a new catalog
	}
	if err != nil {
		return nil, err
	}
	s, err := r.data.catalog()
	if err != nil {
		return nil, err
	}
	got, err := s.GetCheckRecord(ctx, rec)
	var gone *catalog.CheckRecordGoneError
	switch {
	case errors.Is(err, catalog.ErrNotFound) || errors.As(err, &gone):
		return nil, nil
	case err == nil:
		doc, derr := decodeRerun(got.Doc)
		if derr == nil {
			return doc, nil
		}
		err = derr
	}
	if errors.Is(err, catalog.ErrTampered) {
		return nil, fmt.Errorf("the record, ConfigMap %s of the catalog namespace, was changed outside kubeplay (%v): "+
			"delete it to run every host, or set rerun_failed_hosts = false", rec, err)
	}
	return nil, fmt.Errorf("%w; grant the credential get on ConfigMaps of the catalog namespace, or set "+
		"rerun_failed_hosts = false to run every host", err)
}

// decodeRerun opens a record's document.
func decodeRerun(raw []byte) (*rerunDoc, error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", catalog.ErrTampered, err)
	}
	var doc rerunDoc
	if err := json.NewDecoder(io.LimitReader(zr, 64<<20)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", catalog.ErrTampered, err)
	}
	if !runengine.ValidID(doc.RunID) || !slices.IsSorted(doc.Hosts) {
		return nil, fmt.Errorf("%w: not a list of hosts kubeplay wrote", catalog.ErrTampered)
	}
	return &doc, nil
}

// rerunUnreadable is the error of a record that could not be read.
func rerunUnreadable(name, when string, err error, diags *diag.Diagnostics) {
	diags.AddAttributeError(path.Root("rerun_failed_hosts"), "Failed Hosts Unreadable",
		fmt.Sprintf("The list of the hosts that failed in the last run named %q could not be read%s: %v.", name, when, err))
}

// rerunValue is doc as rerun_hosts.
func rerunValue(doc *rerunDoc, diags *diag.Diagnostics) types.Object {
	if doc == nil {
		return types.ObjectNull(rerunHostsType.AttrTypes)
	}
	v, d := types.ObjectValue(rerunHostsType.AttrTypes, map[string]attr.Value{
		"run_id": types.StringValue(doc.RunID), "count": types.Int64Value(int64(len(doc.Hosts))),
		"sha256": types.StringValue(hostsSHA256(doc.Hosts)),
	})
	diags.Append(d...)
	return v
}

// planRerun sets rerun_hosts of a new run from its name's record.
func (r *runResource) planRerun(ctx context.Context, plan *runModel, diags *diag.Diagnostics) {
	plan.RerunHosts = types.ObjectNull(rerunHostsType.AttrTypes)
	switch {
	case plan.RerunFailedHosts.IsUnknown() || plan.RerunFailedHosts.ValueBool() && (plan.Name.IsUnknown() || r.data == nil):
		plan.RerunHosts = types.ObjectUnknown(rerunHostsType.AttrTypes)
		return
	case !plan.RerunFailedHosts.ValueBool():
		return
	}
	doc, err := r.loadRerun(ctx, plan.Name.ValueString())
	if err != nil {
		rerunUnreadable(plan.Name.ValueString(), "", err, diags)
		return
	}
	plan.RerunHosts = rerunValue(doc, diags)
	if doc != nil {
		plan.rerunList = doc.Hosts // for the plan-time check
	}
}

// applyRerun gives the run the hosts its plan showed: the record must
// still hold them.
func (r *runResource) applyRerun(ctx context.Context, plan *runModel, diags *diag.Diagnostics) {
	if !plan.RerunFailedHosts.ValueBool() {
		return
	}
	doc, err := r.loadRerun(ctx, plan.Name.ValueString())
	if err != nil {
		rerunUnreadable(plan.Name.ValueString(), " (nothing ran)", err, diags)
		return
	}
	got := rerunValue(doc, diags)
	if !plan.RerunHosts.IsUnknown() && !got.Equal(plan.RerunHosts) {
		diags.AddAttributeError(path.Root("rerun_hosts"), "Failed Hosts Changed Since The Plan",
			fmt.Sprintf("The plan showed the run targeting %s, but the list of the hosts that failed in the last run "+
				"named %q is now %s: another run of that name ended since. Nothing ran. Plan again.",
				describeRerun(plan.RerunHosts), plan.Name.ValueString(), describeRerun(got)))
		return
	}
	plan.RerunHosts = got
	if doc != nil {
		plan.rerunList = doc.Hosts
	}
}

func describeRerun(v types.Object) string {
	if v.IsNull() {
		return "every host"
	}
	a := v.Attributes()
	return fmt.Sprintf("the %s hosts that failed in run %s (sha256 %s)", a["count"], a["run_id"], a["sha256"])
}

// rerunKeeps reports whether res's failed hosts may narrow the next run:
// only when every host's playbook reported how it ended. A run that ended
// in error or was canceled (a slice lost or refused, the host listing
// failed, Ctrl-C) may have hosts that never ran, so its next run targets
// every host.
func rerunKeeps(res runner.Result) bool {
	return res.Status == runner.StatusSuccessful || res.Status == runner.StatusFailed
}

// storeRerun keeps the hosts of run id that failed or were unreachable
// for the next run named as plan, or deletes the record when none did or
// the run may have left hosts unrun (rerunKeeps). A failure to keep them
// is a warning: the run is recorded as it ended.
func (r *runResource) storeRerun(ctx context.Context, plan runModel, id string, res runner.Result, diags *diag.Diagnostics) {
	if !plan.RerunFailedHosts.ValueBool() {
		return
	}
	name, err := r.rerunName(ctx, plan.Name.ValueString())
	var s *catalog.Store
	if err == nil {
		s, err = r.data.catalog()
	}
	if err != nil {
		rerunNotKept(ctx, plan, id, len(res.NotOKHosts), err, diags)
		return
	}
	if rerunKeeps(res) && len(res.NotOKHosts) > 0 {
		hosts := slices.Compact(slices.Sorted(slices.Values(res.NotOKHosts)))
		doc, err := gzipJSON(rerunDoc{RunID: id, Hosts: hosts})
		if err == nil && len(doc) > maxRerunRecord {
			err = fmt.Errorf("the list of %d hosts takes %d bytes compressed, more than the %d a record holds", len(hosts), len(doc), maxRerunRecord)
		}
		if err == nil {
			err = s.PutCheckRecord(ctx, name, doc, rerunRecordTTL)
		}
		if err == nil || errors.Is(err, catalog.ErrIndexReset) {
			return
		}
		rerunNotKept(ctx, plan, id, len(hosts), err, diags)
	}
	// No list, or one that could not be kept: an older list must not narrow
	// the next run either.
	if err := s.DeleteCheckRecord(ctx, name); err != nil && !errors.Is(err, catalog.ErrNotFound) && !errors.Is(err, catalog.ErrIndexReset) {
		rerunNotKept(ctx, plan, id, len(res.NotOKHosts), err, diags)
	}
}

// rerunNotKept warns that the next run of plan's name may not target what
// this run left to re-run.
func rerunNotKept(ctx context.Context, plan runModel, id string, n int, err error, diags *diag.Diagnostics) {
	tflog.Warn(ctx, "keeping the run's failed hosts failed", map[string]any{"run": id, "error": err.Error()})
	diags.AddAttributeWarning(path.Root("rerun_failed_hosts"), "Failed Hosts Not Kept",
		fmt.Sprintf("The run's %d hosts that failed or were unreachable could not be kept for its next run: %v. The "+
			"next run of %q targets every host, or, if the earlier list could not be deleted either, that list: its "+
			"plan shows which (rerun_hosts). Grant the credential create, update and delete on ConfigMaps of the "+
			"catalog namespace.", n, err, plan.Name.ValueString()))
}

func gzipJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
