package handoff

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
	"golang.org/x/text/language"
)

// Rules that code names outside struct tags; FieldError lists them all. The
// exported ones also name the problems that adapters such as the sw4rm
// package find in their own formats.
const (
	RuleRequired = "required"
	RuleMax      = "max"
	RuleType     = "type" // a value of the wrong JSON type
	RuleDatetime = "datetime"
	RuleNUL      = "nul" // a string with a NUL character (\u0000)
	// RuleVisibleText: a name (source_agent, contact.display_name) holds a character that shows
	// nothing or reorders the text around it (visibleTextPattern).
	RuleVisibleText = "visible_text"

	ruleSchemaVersion = "schema_version"
	ruleUnknownField  = "unknown_field"
	ruleEmpty         = "empty"
	ruleKey           = "key"
)

// SupportedVersions names the schema versions Decode accepts, for messages and documentation.
const SupportedVersions = "1.x"

// Patterns of the project's own rules. The JSON Schema is generated from the
// same strings, so each is written to mean the same in Go's RE2 and in the
// ECMA-262 dialect of JSON Schema validators: no lookaround, no \d or \w.
const (
	versionPattern   = `^1\.[0-9]+$`
	handoffIDPattern = `^[A-Za-z0-9_.:-]+$`
	// Keys of structured_entities and privacy_flags: they appear in field
	// paths and queue settings, so they stay identifiers.
	keyPattern = `^[A-Za-z0-9_.:-]{1,64}$`
	// One paragraph: no line that is empty or only spaces between two line
	// breaks. Spelled as what is allowed, as RE2 cannot say "not followed by".
	singleParagraphPattern = `^[^\n]*(\n[ \t\r]*[^\n \t\r][^\n]*)*(\n[ \t\r]*)?$`
	// BCP 47 syntax, hyphens only; language.Parse then checks the subtags.
	bcp47Pattern  = `^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`
	amountPattern = `^[0-9]{1,12}(\.[0-9]{1,4})?$`
	// Visible text: a name shown on every page, so none of the characters that show nothing or
	// reorder what follows them (controls, line breaks, zero-width and bidirectional marks,
	// embeddings, overrides and isolates, the word joiner and invisible operators, the byte order
	// mark, fillers that render as blanks). Written as the characters themselves, which RE2 and
	// ECMA-262 read alike in a class.
	visibleTextPattern = "^[^\u0000-\u001f\u007f-\u009f\u00ad\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb]*$"
	zeroAmountPattern  = `^0+(\.0+)?$`
)

// Caps on structured_entities values, which no struct tag can reach.
const (
	maxEntityText      = 1000
	maxEntityListItems = 100
)

// check is the one validator, with the patterns its rules use, built once:
// all of it is safe for concurrent use.
var check = newChecker()

type checker struct {
	validate                                 *validator.Validate
	version, handoffID, key, singleParagraph *regexp.Regexp
	bcp47, amount, zeroAmount, visibleText   *regexp.Regexp
	enums                                    sync.Map // reflect.Type → []string, its allowed values
}

func newChecker() *checker {
	c := &checker{
		validate:        validator.New(validator.WithRequiredStructEnabled()),
		version:         regexp.MustCompile(versionPattern),
		handoffID:       regexp.MustCompile(handoffIDPattern),
		key:             regexp.MustCompile(keyPattern),
		singleParagraph: regexp.MustCompile(singleParagraphPattern),
		bcp47:           regexp.MustCompile(bcp47Pattern),
		amount:          regexp.MustCompile(amountPattern),
		zeroAmount:      regexp.MustCompile(zeroAmountPattern),
		visibleText:     regexp.MustCompile(visibleTextPattern),
	}
	v := c.validate
	v.RegisterTagNameFunc(jsonName)
	// oneof and uri replace the validator's own: oneof reads the values from
	// the field's enum type, so each list is written once, and uri insists on
	// a scheme where the built-in also takes a bare path.
	c.register("oneof", func(s string, fl validator.FieldLevel) bool {
		return slices.Contains(c.enumValues(fl.Field()), s)
	})
	c.register("uri", func(s string, _ validator.FieldLevel) bool {
		u, err := url.Parse(s)
		return err == nil && u.IsAbs()
	})
	c.register("https", func(s string, _ validator.FieldLevel) bool {
		u, err := url.Parse(s)
		return err == nil && u.Scheme == "https" && u.Host != ""
	})
	c.register("notblank", func(s string, _ validator.FieldLevel) bool { return strings.TrimSpace(s) != "" })
	c.register(ruleSchemaVersion, func(s string, _ validator.FieldLevel) bool { return c.version.MatchString(s) })
	c.register("handoff_id", func(s string, _ validator.FieldLevel) bool { return c.handoffID.MatchString(s) })
	c.register("single_paragraph", func(s string, _ validator.FieldLevel) bool { return c.singleParagraph.MatchString(s) })
	c.register("bcp47", func(s string, _ validator.FieldLevel) bool {
		_, err := language.Parse(s)
		return err == nil && c.bcp47.MatchString(s)
	})
	c.register(RuleVisibleText, func(s string, _ validator.FieldLevel) bool { return c.visibleText.MatchString(s) })
	c.register("amount", func(s string, _ validator.FieldLevel) bool {
		return c.amount.MatchString(s) && !c.zeroAmount.MatchString(s)
	})
	return c
}

// enumValues returns the allowed values of v's enum type. They are listed once
// per type: every package has several enum fields, one per transcript turn.
func (c *checker) enumValues(v reflect.Value) []string {
	if values, ok := c.enums.Load(v.Type()); ok {
		return values.([]string)
	}
	values, _ := allowedValues(v.Interface())
	c.enums.Store(v.Type(), values)
	return values
}

// register adds a rule on string fields, including named string types.
func (c *checker) register(tag string, ok func(s string, fl validator.FieldLevel) bool) {
	err := c.validate.RegisterValidation(tag, func(fl validator.FieldLevel) bool {
		return ok(fl.Field().String(), fl)
	})
	if err != nil {
		panic(err) // only for an empty tag or nil function: a bug here
	}
}

// QueueRules are the rules a queue adds to the schema's.
type QueueRules struct {
	// RequiredEntityKeys are structured_entities keys the queue cannot work
	// without, such as account_id.
	RequiredEntityKeys []string
}

// Validate checks the package against the rules of schema v1 and returns a
// *ValidationError naming every problem, or nil. Decode applies the same
// rules; Validate is for packages built in Go, such as one converted from
// another input format.
func (p *Package) Validate() error {
	return NewValidationError(p.fieldErrors())
}

// ValidateForQueue checks the rules of the queue the package is for and
// returns a *ValidationError naming every problem, or nil. An entity that is
// an empty string or an empty list counts as missing. Combine its result with
// Decode's by MergeErrors.
func (p *Package) ValidateForQueue(rules QueueRules) error {
	var errs []FieldError
	for _, key := range rules.RequiredEntityKeys {
		if v, ok := p.StructuredEntities[key]; !ok || v.isEmpty() {
			path := "structured_entities." + key
			errs = append(errs, FieldError{
				Field:   path,
				Rule:    RuleRequired,
				Message: path + " is required by queue " + p.TargetProfile,
			})
		}
	}
	return NewValidationError(errs)
}

func (p *Package) fieldErrors() []FieldError {
	var errs []FieldError
	// Struct fails otherwise only when not given a struct.
	verrs, _ := errors.AsType[validator.ValidationErrors](check.validate.Struct(p))
	for _, fe := range verrs {
		errs = append(errs, fieldError(fe))
	}
	errs = append(errs, entityErrors(p.StructuredEntities)...)
	errs = append(errs, keyErrors("privacy_flags", mapKeys(p.PrivacyFlags))...)
	return errs
}

func unsupportedVersion(v string) FieldError {
	return FieldError{Field: "schema_version", Rule: ruleSchemaVersion, Message: "schema_version " + versionNotSupported(v)}
}

func versionNotSupported(v string) string {
	return fmt.Sprintf("%q is not supported; supported: %s", v, SupportedVersions)
}

func entityErrors(entities map[string]EntityValue) []FieldError {
	errs := keyErrors("structured_entities", mapKeys(entities))
	for key, v := range entities {
		path := "structured_entities." + key
		switch v.kind {
		case EntityString:
			if utf8.RuneCountInString(v.text) > maxEntityText {
				errs = append(errs, tooLong(path, maxEntityText))
			}
		case EntityList:
			if len(v.list) > maxEntityListItems {
				errs = append(errs, FieldError{Field: path, Rule: RuleMax, Message: fmt.Sprintf("%s must have at most %d items", path, maxEntityListItems)})
			}
			for i, item := range v.list {
				if utf8.RuneCountInString(item) > maxEntityText {
					errs = append(errs, tooLong(fmt.Sprintf("%s[%d]", path, i), maxEntityText))
				}
			}
		case 0:
			errs = append(errs, FieldError{Field: path, Rule: RuleType, Message: path + " must be a string, number, boolean or list of strings"})
		}
	}
	return errs
}

func keyErrors(field string, keys []string) []FieldError {
	var errs []FieldError
	for _, key := range keys {
		if !check.key.MatchString(key) {
			path := field + "." + key
			errs = append(errs, FieldError{Field: path, Rule: ruleKey, Message: path + ": keys must be 1 to 64 characters of A-Z a-z 0-9 _ . : -"})
		}
	}
	return errs
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func tooLong(path string, n int) FieldError {
	return FieldError{Field: path, Rule: RuleMax, Message: fmt.Sprintf("%s must be at most %d characters", path, n)}
}

// fieldError turns the validator's report into the API's.
func fieldError(fe validator.FieldError) FieldError {
	_, path, _ := strings.Cut(fe.Namespace(), ".") // drop the root type's name
	return FieldError{Field: path, Rule: fe.Tag(), Message: path + " " + describe(fe)}
}

// describe completes a sentence that starts with the field's path.
func describe(fe validator.FieldError) string {
	switch fe.Tag() {
	case RuleRequired:
		return "is required"
	case "notblank":
		return "must not be blank"
	case ruleSchemaVersion:
		return versionNotSupported(fmt.Sprint(fe.Value()))
	case RuleMax:
		switch fe.Kind() {
		case reflect.String:
			return "must be at most " + fe.Param() + " characters"
		case reflect.Map:
			return "must have at most " + fe.Param() + " entries"
		case reflect.Int, reflect.Int64:
			return "must be at most " + fe.Param()
		}
		return "must have at most " + fe.Param() + " items"
	case "oneof":
		values, _ := allowedValues(fe.Value())
		return "must be one of: " + strings.Join(values, ", ")
	case "email":
		return "must be an email address"
	case "uri":
		return "must be a URI with a scheme, like https://example.com/a or crm://ticket/8812"
	case "bcp47":
		return "must be a BCP 47 language tag, like en-US"
	case "iso4217":
		return "must be an ISO 4217 currency code, like USD"
	case "handoff_id":
		return "must use only A-Z a-z 0-9 _ . : -"
	case "https":
		return "must be an https URL, like https://files.example.com/receipt.pdf"
	case "min":
		return "must be at least " + fe.Param()
	case "single_paragraph":
		return "must be a single paragraph, without blank lines"
	case RuleVisibleText:
		return "must not hold invisible or control characters, such as zero-width spaces or right-to-left overrides"
	case "amount":
		return `must be a positive decimal string with at most 12 digits before the point and 4 after, like "49.99"`
	}
	return "breaks rule " + fe.Tag()
}

// tagRules lists the validate rules, with their parameters, that apply to a
// field itself rather than to its items.
func tagRules(f reflect.StructField) []string {
	tag := f.Tag.Get("validate")
	if tag == "" {
		return nil
	}
	rules := strings.Split(tag, ",")
	if i := slices.Index(rules, "dive"); i >= 0 {
		rules = rules[:i]
	}
	return rules
}

var amountRE, zeroAmountRE = regexp.MustCompile(amountPattern), regexp.MustCompile(zeroAmountPattern)

// ValidAmount reports whether s is an amount as refund.amount takes it: a positive decimal string
// with at most 4 decimals. Agents who state another refunded amount at the desk are held to it.
func ValidAmount(s string) bool { return amountRE.MatchString(s) && !zeroAmountRE.MatchString(s) }
