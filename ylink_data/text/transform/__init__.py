"""Transform: turning documents into clean text — main-text extraction from HTML, Unicode and
whitespace normalisation, language identification. Plain functions and small classes; the ops in
`ylink_data.ops` wrap them for pipelines."""
