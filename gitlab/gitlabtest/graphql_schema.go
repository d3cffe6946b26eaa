package gitlabtest

// graphQLSchema is the subset of GitLab's GraphQL schema the fake answers,
// with GitLab's type names, field names, argument names and nullability
// (app/graphql/types/query_type.rb, project_type.rb, group_type.rb,
// repository_type.rb, repository/blob_type.rb, query_complexity_type.rb,
// resolvers/repository_branch_names_resolver.rb; the connection types
// graphql-ruby generates). Fields GitLab has and depsd
// does not read are left out: asking for one is answered as GitLab answers
// a field that does not exist, which a test would notice.
const graphQLSchema = `
schema { query: Query }

scalar Time
scalar BigInt

type Query {
  project(fullPath: ID!): Project
  projects(
    ids: [ID!], fullPaths: [String!], search: String, membership: Boolean, sort: String,
    after: String, before: String, first: Int, last: Int
  ): ProjectConnection
  group(fullPath: ID!): Group
  queryComplexity: QueryComplexity
}

type QueryComplexity {
  limit: Int
  score: Int
}

type PageInfo {
  endCursor: String
  hasNextPage: Boolean!
  hasPreviousPage: Boolean!
  startCursor: String
}

type Group {
  id: ID!
  fullPath: ID!
  projects(
    includeSubgroups: Boolean = false, search: String, sort: String,
    after: String, before: String, first: Int, last: Int
  ): ProjectConnection!
}

type ProjectConnection {
  count: Int!
  edges: [ProjectEdge]
  nodes: [Project]
  pageInfo: PageInfo!
}

type ProjectEdge {
  cursor: String!
  node: Project
}

type Project {
  id: ID!
  fullPath: ID!
  path: String!
  name: String!
  archived: Boolean
  lastActivityAt: Time
  markedForDeletionOn: Time
  webUrl: String
  repository: Repository
}

type Repository {
  rootRef: String
  empty: Boolean!
  exists: Boolean!
  branchNames(searchPattern: String!, offset: Int!, limit: Int!): [String!]
  blobs(paths: [String!]!, ref: String, after: String, before: String, first: Int, last: Int): RepositoryBlobConnection
}

type RepositoryBlobConnection {
  edges: [RepositoryBlobEdge]
  nodes: [RepositoryBlob]
  pageInfo: PageInfo!
}

type RepositoryBlobEdge {
  cursor: String!
  node: RepositoryBlob
}

type RepositoryBlob {
  id: ID!
  oid: String!
  path: String!
  name: String
  size: BigInt
  rawBlob: String
  rawTextBlob: String
}
`
