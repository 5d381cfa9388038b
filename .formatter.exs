[
  inputs: ["{mix,.formatter}.exs", "{config,lib,dev,test,mix,bench}/**/*.{ex,exs}"]
]
