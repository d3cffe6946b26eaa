package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"gitlab.com/depsd/depsd/chain"
)

// Validations reads the validations of merge requests before the merge
// (premerge); *chain.Engine implements it.
type Validations interface {
	Validations(ctx context.Context, f chain.MRFilter) ([]chain.ValidationView, error)
	// Validation returns one validation (a chain id) or an error wrapping
	// chain.ErrNotFound.
	Validation(ctx context.Context, chainID int64) (chain.ValidationView, error)
}

// validationView is one validation's page: the merge request, the
// answer depsd gives on it, and the dependents by level (the upstream,
// level 0, is the candidate shown above them).
type validationView struct {
	chain.ValidationView
	Members chainView // the validation's members by wave; none before it started
	Live    bool
	// Earlier are the merge request's earlier validations.
	Earlier []int64
}

func viewValidation(v chain.ValidationView) validationView {
	out := validationView{ValidationView: v}
	if v.Chain != nil {
		out.Members = viewChain(*v.Chain)
		out.Live = v.Chain.State.Active()
		for _, id := range v.Chains {
			if id != v.Chain.ID {
				out.Earlier = append(out.Earlier, id)
			}
		}
	}
	return out
}

// validations lists the merge requests validated that the person may
// see (their upstream), as they may see them, up to limit.
func (rd *reads) validations(limit int) ([]chain.ValidationView, error) {
	if rd.d.opts.Validations == nil {
		return nil, nil
	}
	f := chain.MRFilter{Limit: limit}
	if !rd.v.Scope.Everything() {
		f.Limit = max(limit*5, 200) // hidden ones take no place in the page
	}
	vs, err := rd.d.opts.Validations.Validations(rd.ctx, f)
	if err != nil {
		return nil, err
	}
	vs = rd.v.Scope.Validations(vs)
	if len(vs) > limit {
		vs = vs[:limit]
	}
	return vs, nil
}

// validation is one validation, ErrNotFound when the person may not see
// its upstream (or validations are off).
func (rd *reads) validation(id int64) (chain.ValidationView, error) {
	if rd.d.opts.Validations == nil {
		return chain.ValidationView{}, fmt.Errorf("validation %d: %w", id, chain.ErrNotFound)
	}
	v, err := rd.d.opts.Validations.Validation(rd.ctx, id)
	if err != nil {
		return chain.ValidationView{}, err
	}
	v, ok := rd.v.Scope.Validation(v)
	if !ok {
		return chain.ValidationView{}, fmt.Errorf("validation %d: %w", id, chain.ErrNotFound)
	}
	return v, nil
}

// validationsPage: the merge requests validated, the most recently
// changed first, each with its newest validation's result.
func (d *Dashboard) validationsPage(w http.ResponseWriter, r *http.Request) {
	vs, err := d.reads(r).validations(100)
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.render(w, r, http.StatusOK, "validations", page{Title: "Validations", Nav: "validations",
		Data: map[string]any{"Validations": vs, "On": d.opts.Validations != nil}})
}

// validationPage: one validation of a merge request (the link of the
// commit status depsd/dependents and of depsd's note), refreshed live
// while it runs.
func (d *Dashboard) validationPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("validation id %q: want a number", r.PathValue("id")))
		return
	}
	v, err := d.reads(r).validation(id)
	switch {
	case notFound(err):
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("there is no validation %d", id))
		return
	case err != nil:
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	d.render(w, r, http.StatusOK, "validation", page{Title: fmt.Sprintf("Validation %d", id), Nav: "validations", Data: viewValidation(v)}, "validation")
}
