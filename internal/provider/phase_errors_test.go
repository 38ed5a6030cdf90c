// Copyright (c) kubeplay authors
// SPDX-License-Identifier: MPL-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeplay/terraform-provider-kubeplay/internal/phase"
)

// TestPhaseErrorText: the provider adds the remedy, in terms of the
// phase's attributes, to the engine's typed errors; a timeout names the
// timeouts key that bounded the operation.
func TestPhaseErrorText(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c", errors.New("conflict"))
	r := phase.NewRef("", "v1", "ConfigMap", "ns", "c")
	for _, c := range []struct {
		err  error
		want string
	}{
		{&phase.OwnedError{Policy: phase.PolicyStrict},
			`the object exists and no phase owns it; inventory_policy "strict" does not take it over: set inventory_policy = "adopt" to adopt it`},
		{&phase.OwnedError{Policy: phase.PolicyAdopt, Owner: "a"},
			`the object belongs to phase "a"; inventory_policy "adopt" never takes over another inventory's object: ` +
				`remove it from one of the phases, or set inventory_policy = "force_adopt"`},
		{&phase.OwnedError{Policy: phase.PolicyStrict, OwnerID: "applyset-x-v1"},
			`the object belongs to ApplySet applyset-x-v1; inventory_policy "strict" never takes over`},
		{&phase.ConflictError{Err: conflict}, "another field manager owns these fields: set force_conflicts = true to take them over"},
		{&phase.WaitError{Want: "ready", NotReady: []phase.Pending{{Ref: r, Status: "InProgress"}}},
			"timed out waiting for resources to be ready: ConfigMap ns/c: InProgress. The apply may take up to " +
				"timeouts.update (2m0s): raise it, or fix what keeps them from being ready"},
		{&phase.WaitError{Want: "deleted", NotReady: []phase.Pending{{Ref: r, Status: "Terminating"}}},
			"timed out waiting for resources to be deleted: ConfigMap ns/c: Terminating. The apply may take up to " +
				"timeouts.update (2m0s): raise it, or fix what keeps them from being deleted"},
		{fmt.Errorf("applying ConfigMap ns/c: %w", context.DeadlineExceeded),
			"applying ConfigMap ns/c: context deadline exceeded: the apply did not finish within timeouts.update (2m0s). Raise it"},
		{&phase.WaitError{Want: "ready", Failed: true, NotReady: []phase.Pending{{Ref: r, Status: "Job Failed"}}},
			"ConfigMap ns/c failed (kstatus Failed): Job Failed"},
		{errors.New("plain"), "plain"},
	} {
		got := phaseErrorText(c.err, &phaseLimit{"update", 2 * time.Minute})
		if !strings.Contains(got, c.want) {
			t.Errorf("%T:\n got %s\nwant it to contain %s", c.err, got, c.want)
		}
		if we, ok := c.err.(*phase.WaitError); ok && we.Failed && strings.Contains(got, "timeouts") {
			t.Errorf("a failed object is not a matter of timeouts: %s", got)
		}
		if got := phaseErrorText(c.err, nil); strings.Contains(got, "timeouts") {
			t.Errorf("without an operation (the plan's dry run), no timeouts key applies: %s", got)
		}
	}
}

// TestAddParseError: a document the engine cannot read is reported on its
// element of documents, or on kustomization.
func TestAddParseError(t *testing.T) {
	docs := phaseModel{Kustomization: types.StringNull()}
	kust := phaseModel{Kustomization: types.StringValue("dir")}
	two := types.ListValueMust(types.StringType, []attr.Value{types.StringValue("a"), types.StringValue("b")})
	both := phaseModel{Kustomization: types.StringNull(), Documents: two, Sensitive: two}
	dup := &phase.DuplicateError{Ref: phase.NewRef("", "v1", "ConfigMap", "", "a"), Doc: 2, First: 0}
	secret := &phase.SecretError{Ref: phase.NewRef("", "v1", "Secret", "ns", "s"), Doc: 1, Part: 2}
	for _, c := range []struct {
		m    phaseModel
		err  error
		at   path.Path
		want string
	}{
		{docs, &phase.ParseError{Doc: 1, Part: 3, Err: errors.New("bad")}, path.Root("documents").AtListIndex(1), "documents[1], YAML document 3: bad"},
		{docs, dup, path.Root("documents").AtListIndex(2), "documents[2]: ConfigMap a is also in documents[0]; each object may appear once"},
		{kust, &phase.ParseError{Doc: 0, Part: 2, Err: errors.New("bad")}, path.Root("kustomization"), "the rendered kustomization, YAML document 2: bad"},
		{docs, errors.New("other"), path.Root("documents"), "other"},
		{both, dup, path.Root("sensitive_documents").AtListIndex(0), "sensitive_documents[0]: ConfigMap a is also in documents[0]"},
		{both, &phase.ParseError{Doc: 3, Part: 1, Err: errors.New("bad")}, path.Root("sensitive_documents").AtListIndex(1), "sensitive_documents[1], YAML document 1: bad"},
		{both, secret, path.Root("documents").AtListIndex(1), "documents[1], YAML document 2: Secret ns/s is a Secret, and documents show in plan output. Move it to sensitive_documents"},
	} {
		var diags diag.Diagnostics
		addParseError(c.m, c.err, &diags)
		if len(diags) != 1 {
			t.Fatalf("%v: %d diagnostics", c.err, len(diags))
		}
		d, ok := diags[0].(diag.DiagnosticWithPath)
		summary := "Invalid Document"
		if c.err == secret {
			summary = "Secret In Documents"
		}
		if !ok || !d.Path().Equal(c.at) || d.Summary() != summary || !strings.Contains(d.Detail(), c.want) {
			t.Errorf("%v: %v at %v, want %q at %v", c.err, diags[0].Detail(), d.Path(), c.want, c.at)
		}
	}
}

// TestAddApplyErrors: refused documents are reported on their element with
// the document named as written; other errors without a path.
func TestAddApplyErrors(t *testing.T) {
	m := phaseModel{Name: types.StringValue("p"), Kustomization: types.StringNull()}
	r := phase.NewRef("", "v1", "ConfigMap", "ns", "shared")
	err := errors.Join(&phase.DocError{Obj: phase.Object{Ref: r, Doc: 0}, Err: &phase.OwnedError{Policy: phase.PolicyStrict, Owner: "owner"}},
		errors.New("writing inventory ConfigMap: forbidden"))
	var diags diag.Diagnostics
	addApplyErrors(m, err, phaseLimit{"create", time.Minute}, &diags)
	if len(diags) != 2 {
		t.Fatalf("%d diagnostics, want 2", len(diags))
	}
	d, ok := diags[0].(diag.DiagnosticWithPath)
	if !ok || !d.Path().Equal(path.Root("documents").AtListIndex(0)) ||
		!strings.Contains(d.Detail(), `Phase "p" could not apply ConfigMap ns/shared (documents[0]): the object belongs to phase "owner"`) {
		t.Errorf("document error: %s", diags[0].Detail())
	}
	if _, ok := diags[1].(diag.DiagnosticWithPath); ok || !strings.Contains(diags[1].Detail(), `Phase "p": writing inventory ConfigMap: forbidden.`) {
		t.Errorf("other error: %s", diags[1].Detail())
	}
}

// TestAddDestroyError: a destroy that passed timeouts.delete says so, with
// the objects still there, the likely cause and the remedy; other errors
// are a plain failure.
func TestAddDestroyError(t *testing.T) {
	r := phase.NewRef("", "v1", "ConfigMap", "ns", "held")
	limit := phaseLimit{"delete", 10 * time.Second}
	for _, c := range []struct {
		err           error
		summary, want string
	}{
		{&phase.WaitError{Want: "deleted", NotReady: []phase.Pending{{Ref: r, Status: "Terminating"}}}, "Phase Destroy Timed Out",
			`Phase "p": timed out waiting for resources to be deleted: ConfigMap ns/held: Terminating. The destroy may ` +
				`take up to timeouts.delete (10s). They were deleted but are still there: usually a finalizer`},
		{fmt.Errorf("deleting ConfigMap ns/held: %w", context.DeadlineExceeded), "Phase Destroy Timed Out",
			"the destroy did not finish within timeouts.delete (10s). Raise timeouts.delete (apply it first: destroy " +
				"reads it from the state), and destroy again"},
		{errors.New("forbidden"), "Phase Destroy Failed", `Phase "p": forbidden. Destroy again`},
	} {
		var diags diag.Diagnostics
		addDestroyError("p", c.err, limit, &diags)
		if len(diags) != 1 || diags[0].Summary() != c.summary || !strings.Contains(diags[0].Detail(), c.want) {
			t.Errorf("%v: got %v, want %q with %q", c.err, diags, c.summary, c.want)
		}
	}
}
