package patches

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// pdfWriter writes a plain PDF of monospaced text lines, page after page, with the standard
// library alone: each page's content stream and page object as the page fills, the page tree,
// catalog, cross-reference table and trailer at the end.
type pdfWriter struct {
	w       *bufio.Writer
	n       int64
	offsets map[int]int64
	next    int
	pages   []int
	lines   []string
	err     error
}

const (
	pdfPageWidth    = 842 // A4 landscape, points
	pdfPageHeight   = 595
	pdfMargin       = 36
	pdfFontSize     = 8
	pdfLineHeight   = 10
	pdfLinesPerPage = (pdfPageHeight - 2*pdfMargin) / pdfLineHeight
	// Object numbers fixed up front: the catalog, the page tree (written last, once its
	// pages are known) and the font.
	pdfCatalog = 1
	pdfPages   = 2
	pdfFont    = 3
)

func newPDFWriter(w io.Writer) *pdfWriter {
	p := &pdfWriter{w: bufio.NewWriterSize(w, 64<<10), offsets: map[int]int64{}, next: 4}
	p.write("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	p.object(pdfFont, "<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>")
	return p
}

func (p *pdfWriter) write(s string) {
	if p.err != nil {
		return
	}
	n, err := p.w.WriteString(s)
	p.n += int64(n)
	p.err = err
}

func (p *pdfWriter) object(num int, body string) {
	p.offsets[num] = p.n
	p.write(strconv.Itoa(num) + " 0 obj\n" + body + "\nendobj\n")
}

// Line adds a line of text, starting a new page when the page is full.
func (p *pdfWriter) Line(s string) {
	p.lines = append(p.lines, s)
	if len(p.lines) == pdfLinesPerPage {
		p.flushPage()
	}
}

func (p *pdfWriter) flushPage() {
	var b strings.Builder
	fmt.Fprintf(&b, "BT\n/F1 %d Tf\n%d TL\n%d %d Td\n", pdfFontSize, pdfLineHeight, pdfMargin, pdfPageHeight-pdfMargin-pdfFontSize)
	for _, l := range p.lines {
		b.WriteString("(" + pdfEscape(l) + ") Tj T*\n")
	}
	b.WriteString("ET")
	content := b.String()
	contentNum, pageNum := p.next, p.next+1
	p.next += 2
	p.object(contentNum, "<< /Length "+strconv.Itoa(len(content))+" >>\nstream\n"+content+"\nendstream")
	p.object(pageNum, fmt.Sprintf("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 %d %d] /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>",
		pdfPages, pdfPageWidth, pdfPageHeight, pdfFont, contentNum))
	p.pages = append(p.pages, pageNum)
	p.lines = p.lines[:0]
}

// Close writes the last page, the page tree, the catalog, the cross-reference table and the
// trailer.
func (p *pdfWriter) Close() error {
	if len(p.lines) > 0 || len(p.pages) == 0 {
		p.flushPage()
	}
	kids := make([]string, len(p.pages))
	for i, n := range p.pages {
		kids[i] = strconv.Itoa(n) + " 0 R"
	}
	p.object(pdfPages, "<< /Type /Pages /Kids ["+strings.Join(kids, " ")+"] /Count "+strconv.Itoa(len(p.pages))+" >>")
	p.object(pdfCatalog, fmt.Sprintf("<< /Type /Catalog /Pages %d 0 R >>", pdfPages))
	xref := p.n
	p.write("xref\n0 " + strconv.Itoa(p.next) + "\n0000000000 65535 f \n")
	for i := 1; i < p.next; i++ {
		p.write(fmt.Sprintf("%010d 00000 n \n", p.offsets[i]))
	}
	p.write(fmt.Sprintf("trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n", p.next, pdfCatalog, xref))
	if p.err != nil {
		return p.err
	}
	return p.w.Flush()
}

// pdfEscape makes s a PDF literal string's content: backslash and parentheses escaped,
// anything outside printable ASCII shown as '?'.
func pdfEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\' || r == '(' || r == ')':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
